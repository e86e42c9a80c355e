CREATE TYPE "public"."job_status" AS ENUM('queued', 'running', 'cancelling', 'succeeded', 'failed', 'cancelled');--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"name" text,
	"prefix" text NOT NULL,
	"hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_keys_hash_unique" UNIQUE("hash"),
	CONSTRAINT "api_keys_hash_is_sha256_hex" CHECK ("api_keys"."hash" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "api_keys_prefix_length" CHECK (length("api_keys"."prefix") between 4 and 32)
);
--> statement-breakpoint
CREATE TABLE "checkpoints" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" uuid NOT NULL,
	"step" integer NOT NULL,
	"attempt" integer NOT NULL,
	"prefix" text NOT NULL,
	"files" jsonb NOT NULL,
	"bytes" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "checkpoints_job_step_key" UNIQUE("job_id","step"),
	CONSTRAINT "checkpoints_step_nonnegative" CHECK ("checkpoints"."step" >= 0),
	CONSTRAINT "checkpoints_bytes_nonnegative" CHECK ("checkpoints"."bytes" >= 0)
);
--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"tenant_id" uuid NOT NULL,
	"key" text NOT NULL,
	"request_sha256" text NOT NULL,
	"job_id" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("tenant_id","key"),
	CONSTRAINT "idempotency_keys_key_length" CHECK (length("idempotency_keys"."key") between 1 and 255),
	CONSTRAINT "idempotency_keys_sha256_hex" CHECK ("idempotency_keys"."request_sha256" ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "job_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"type" text NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "job_events_type_format" CHECK ("job_events"."type" ~ '^[a-z][a-z0-9_.:-]{0,63}$')
);
--> statement-breakpoint
CREATE TABLE "job_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" uuid NOT NULL,
	"step" integer NOT NULL,
	"attempt" integer NOT NULL,
	"values" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "job_metrics_job_step_key" UNIQUE("job_id","step"),
	CONSTRAINT "job_metrics_step_nonnegative" CHECK ("job_metrics"."step" >= 0)
);
--> statement-breakpoint
CREATE TABLE "jobs" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"status" "job_status" DEFAULT 'queued' NOT NULL,
	"method" text NOT NULL,
	"spec" jsonb NOT NULL,
	"priority" integer DEFAULT 0 NOT NULL,
	"device" text DEFAULT 'cpu' NOT NULL,
	"attempt" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 3 NOT NULL,
	"worker_id" text,
	"lease_expires_at" timestamp with time zone,
	"heartbeat_at" timestamp with time zone,
	"progress" jsonb,
	"latest_metrics" jsonb,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"queued_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	CONSTRAINT "jobs_terminal_iff_finished" CHECK (("jobs"."status" in ('succeeded', 'failed', 'cancelled')) = ("jobs"."finished_at" is not null)),
	CONSTRAINT "jobs_held_has_lease" CHECK ("jobs"."status" not in ('running', 'cancelling') or ("jobs"."worker_id" is not null and "jobs"."lease_expires_at" is not null and "jobs"."started_at" is not null)),
	CONSTRAINT "jobs_unheld_has_no_lease" CHECK ("jobs"."status" in ('running', 'cancelling') or ("jobs"."worker_id" is null and "jobs"."lease_expires_at" is null)),
	CONSTRAINT "jobs_failed_has_error" CHECK ("jobs"."status" <> 'failed' or "jobs"."error" is not null),
	CONSTRAINT "jobs_attempt_nonnegative" CHECK ("jobs"."attempt" >= 0),
	CONSTRAINT "jobs_attempt_within_max" CHECK ("jobs"."attempt" < "jobs"."max_attempts"),
	CONSTRAINT "jobs_max_attempts_range" CHECK ("jobs"."max_attempts" between 1 and 100),
	CONSTRAINT "jobs_method_known" CHECK ("jobs"."method" in ('seed', 'grpo', 'sft')),
	CONSTRAINT "jobs_device_known" CHECK ("jobs"."device" in ('cpu', 'gpu')),
	CONSTRAINT "jobs_error_length" CHECK ("jobs"."error" is null or length("jobs"."error") <= 4000)
);
--> statement-breakpoint
CREATE TABLE "skill_libraries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" uuid NOT NULL,
	"step" integer NOT NULL,
	"attempt" integer NOT NULL,
	"key" text NOT NULL,
	"bytes" bigint NOT NULL,
	"sha256" text NOT NULL,
	"skill_count" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "skill_libraries_job_step_key" UNIQUE("job_id","step"),
	CONSTRAINT "skill_libraries_sha256_hex" CHECK ("skill_libraries"."sha256" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "skill_libraries_count_nonnegative" CHECK ("skill_libraries"."skill_count" >= 0)
);
--> statement-breakpoint
CREATE TABLE "tenants" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenants_name_unique" UNIQUE("name"),
	CONSTRAINT "tenants_name_length" CHECK (length("tenants"."name") between 1 and 200)
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD CONSTRAINT "checkpoints_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "job_events" ADD CONSTRAINT "job_events_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "job_metrics" ADD CONSTRAINT "job_metrics_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "skill_libraries" ADD CONSTRAINT "skill_libraries_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "api_keys_tenant_idx" ON "api_keys" USING btree ("tenant_id");--> statement-breakpoint
CREATE INDEX "job_events_job_idx" ON "job_events" USING btree ("job_id","id");--> statement-breakpoint
CREATE INDEX "jobs_claim_idx" ON "jobs" USING btree ("device","priority" DESC NULLS LAST,"queued_at","id") WHERE "jobs"."status" = 'queued';--> statement-breakpoint
CREATE INDEX "jobs_lease_idx" ON "jobs" USING btree ("lease_expires_at") WHERE "jobs"."status" in ('running', 'cancelling');--> statement-breakpoint
CREATE INDEX "jobs_tenant_created_idx" ON "jobs" USING btree ("tenant_id","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);