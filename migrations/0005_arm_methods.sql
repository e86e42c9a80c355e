ALTER TABLE "jobs" DROP CONSTRAINT "jobs_method_known";--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_method_known" CHECK ("jobs"."method" in ('seed', 'grpo', 'gigpo', 'sft'));