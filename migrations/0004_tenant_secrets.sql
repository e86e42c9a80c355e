CREATE TABLE "tenant_secrets" (
	"tenant_id" uuid NOT NULL,
	"name" text NOT NULL,
	"nonce" text NOT NULL,
	"ciphertext" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_secrets_pkey" PRIMARY KEY("tenant_id","name"),
	CONSTRAINT "tenant_secrets_name_format" CHECK ("tenant_secrets"."name" ~ '^[a-z][a-z0-9_-]{0,63}$')
);
--> statement-breakpoint
ALTER TABLE "tenant_secrets" ADD CONSTRAINT "tenant_secrets_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;