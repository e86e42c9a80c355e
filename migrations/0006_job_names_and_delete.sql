ALTER TABLE "jobs" ADD COLUMN "name" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "metadata" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "deleting_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "jobs_tenant_name_idx" ON "jobs" USING btree ("tenant_id","name" collate "C");--> statement-breakpoint
CREATE INDEX "jobs_metadata_idx" ON "jobs" USING gin ("metadata" jsonb_path_ops);--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_name_length" CHECK ("jobs"."name" is null or length("jobs"."name") between 1 and 128);--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_metadata_object" CHECK (jsonb_typeof("jobs"."metadata") = 'object');--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_deleting_is_final" CHECK ("jobs"."deleting_at" is null or "jobs"."status" in ('succeeded', 'failed', 'cancelled'));