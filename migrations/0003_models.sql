CREATE TABLE "models" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"name" text,
	"architecture" text NOT NULL,
	"config" jsonb NOT NULL,
	"parameter_count" bigint NOT NULL,
	"files" jsonb NOT NULL,
	"bytes" bigint NOT NULL,
	"idempotency_key" text,
	"request_sha256" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "models_tenant_idempotency_key" UNIQUE("tenant_id","idempotency_key"),
	CONSTRAINT "models_bytes_nonnegative" CHECK ("models"."bytes" >= 0),
	CONSTRAINT "models_parameter_count_positive" CHECK ("models"."parameter_count" > 0),
	CONSTRAINT "models_request_sha256_hex" CHECK ("models"."request_sha256" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "models_name_length" CHECK ("models"."name" is null or length("models"."name") between 1 and 200)
);
--> statement-breakpoint
ALTER TABLE "models" ADD CONSTRAINT "models_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "models_tenant_created_idx" ON "models" USING btree ("tenant_id","created_at");