ALTER TABLE "job_events" ADD COLUMN "key" text;--> statement-breakpoint
ALTER TABLE "job_events" ADD CONSTRAINT "job_events_job_key" UNIQUE("job_id","key");--> statement-breakpoint
ALTER TABLE "job_events" ADD CONSTRAINT "job_events_key_length" CHECK ("job_events"."key" is null or length("job_events"."key") between 1 and 128);