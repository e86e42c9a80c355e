/**
 * One readable line per job event (`GET /v1/jobs/{id}/events`), shared by `seed follow` and the
 * demo: `status: running`, `stage: rollout` (first sight only), `eval at step 4: test_seen success
 * 38%  score 0.41 (8 episodes)`, `warmup_analyzer: SFT step 8/16, loss 2.310`; `step` summaries
 * give no line (the progress line covers them).
 */
import type { SseMessage } from "./client.ts";
import { stageDetail } from "./progress.ts";

/** Formats a rate in [0, 1] as a whole percentage. */
export function percent(rate: number): string {
  return `${Math.round(rate * 100)}%`;
}

function numericFields(data: unknown, prefix = ""): string[] {
  if (data === null || typeof data !== "object") return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
    if (typeof v === "number") {
      const shown = /success_rate$/.test(k) ? percent(v) : String(+v.toFixed(3));
      out.push(`${prefix}${k}=${shown}`);
    } else if (typeof v === "string" && k !== "stage") out.push(`${prefix}${k}=${v}`);
    else if (v && typeof v === "object" && !Array.isArray(v)) {
      out.push(...numericFields(v, `${prefix}${k}.`));
    }
  }
  return out;
}

/**
 * The line to print for an event, or null for events the progress line already covers
 * (`step` summaries, repeated stages). `seenStages` is updated.
 */
export function eventLine(msg: SseMessage, seenStages: Set<string>): string | null {
  let event: { type?: string; data?: Record<string, unknown> };
  try {
    event = JSON.parse(msg.data);
  } catch {
    return null;
  }
  const data = event.data ?? {};
  switch (msg.event) {
    case "status":
      return `status: ${data.status ?? JSON.stringify(data)}${
        data.error ? ` (${data.error})` : ""
      }`;
    case "stage": {
      const stage = String(data.stage ?? "");
      if (seenStages.has(stage)) return null;
      seenStages.add(stage);
      return `stage: ${stage}`;
    }
    case "step":
      return null;
    case "eval":
      if (typeof data.split === "string" && typeof data.success_rate === "number") {
        const score = typeof data.score === "number" ? `  score ${+data.score.toFixed(3)}` : "";
        const n = typeof data.episodes === "number" ? ` (${data.episodes} episodes)` : "";
        return `eval at step ${data.step}: ${data.split} success ${
          percent(data.success_rate)
        }${score}${n}`;
      }
      return `eval: ${numericFields(data).join("  ") || JSON.stringify(data)}`;
    case "warmup_check":
      if (typeof data.success === "number") {
        const target = typeof data.target === "number" ? ` (target ${percent(data.target)})` : "";
        return `warm-up check at SFT step ${data.done}/${data.total}: held-out success ${
          percent(data.success)
        }${target}`;
      }
      return `warmup_check: ${JSON.stringify(data)}`;
    case "warmup_progress": {
      const detail = stageDetail(data);
      return detail ? `${data.stage ?? "warm-up"}: ${detail}` : null;
    }
    case "warmup_skill_check":
      if (typeof data.success === "number" && typeof data.success_with_skill === "number") {
        const delta = typeof data.delta_lost === "number" ? data.delta_lost.toFixed(3) : "?";
        return `skill check: success ${percent(data.success)} without a skill, ${
          percent(data.success_with_skill)
        } with the reference skill; Δ log-prob on lost turns ${delta} nats/token`;
      }
      return `warmup_skill_check: ${JSON.stringify(data)}`;
    default:
      return `${msg.event}: ${numericFields(data).join("  ") || JSON.stringify(data)}`;
  }
}
