CREATE TABLE "trajectory_dumps" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" uuid NOT NULL,
	"step" integer NOT NULL,
	"kind" text NOT NULL,
	"attempt" integer NOT NULL,
	"key" text NOT NULL,
	"bytes" bigint NOT NULL,
	"sha256" text NOT NULL,
	"trajectory_count" integer NOT NULL,
	"images" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "trajectory_dumps_job_step_kind_key" UNIQUE("job_id","step","kind"),
	CONSTRAINT "trajectory_dumps_step_nonnegative" CHECK ("trajectory_dumps"."step" >= 0),
	CONSTRAINT "trajectory_dumps_kind_known" CHECK ("trajectory_dumps"."kind" in ('rollout', 'eval')),
	CONSTRAINT "trajectory_dumps_sha256_hex" CHECK ("trajectory_dumps"."sha256" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "trajectory_dumps_count_nonnegative" CHECK ("trajectory_dumps"."trajectory_count" >= 0)
);
--> statement-breakpoint
ALTER TABLE "trajectory_dumps" ADD CONSTRAINT "trajectory_dumps_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;