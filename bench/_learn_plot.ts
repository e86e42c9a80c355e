/**
 * `learn.svg` of `deno task bench:learn`: one panel per (env, split), success rate against
 * training samples, a mean curve per arm with its 95% t-interval over seeds as a band
 * (no band with one seed). Hand-written SVG, no dependencies.
 */
import type { MeanRow } from "./_learn_report.ts";

/** Colours of the known arms (bench/_learn_arms.ts); any other arm takes one of `SPARE`. */
const COLORS: Record<string, string> = {
  grpo: "#d62728",
  seed: "#1f77b4",
  gigpo: "#ff7f0e",
  "seed-gigpo": "#2ca02c",
  "seed-oracle": "#9467bd",
};
const SPARE = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const SPLITS = ["test_seen", "test_unseen"];

/** Escapes text for an SVG text node or attribute. */
const esc = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** The SVG document for `means` (see module doc); rows are envs, columns splits. */
export function learnPlot(means: readonly MeanRow[], seeds: number): string {
  const envs = [...new Set(means.map((m) => m.env))];
  const arms = [...new Set(means.map((m) => m.arm))];
  const colorOf = (arm: string) => COLORS[arm] ?? SPARE[arms.indexOf(arm) % SPARE.length];
  const W = 420, H = 260, pad = 44;
  const maxSamples = Math.max(1, ...means.map((m) => m.samples));
  const x = (s: number) => pad + (s / maxSamples) * (W - 2 * pad);
  const y = (v: number) => H - pad - Math.min(1, Math.max(0, v)) * (H - 2 * pad);
  const pt = (s: number, v: number) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`;
  const panels: string[] = [];
  envs.forEach((env, row) => {
    SPLITS.forEach((split, col) => {
      const parts: string[] = [];
      for (const arm of arms) {
        const pts = means
          .filter((m) => m.env === env && m.split === split && m.arm === arm)
          .sort((a, b) => a.samples - b.samples);
        if (!pts.length) continue;
        const color = colorOf(arm);
        if (pts.every((p) => Number.isFinite(p.success.half))) {
          const band = [
            ...pts.map((p) => pt(p.samples, p.success.high)),
            ...[...pts].reverse().map((p) => pt(p.samples, p.success.low)),
          ];
          parts.push(
            `<polygon fill="${color}" fill-opacity="0.15" stroke="none" points="${
              band.join(" ")
            }"/>`,
          );
        }
        parts.push(
          `<polyline fill="none" stroke="${color}" stroke-width="2" points="${
            pts.map((p) => pt(p.samples, p.success.mean)).join(" ")
          }"/>`,
          ...pts.map((p) =>
            `<circle cx="${x(p.samples).toFixed(1)}" cy="${
              y(p.success.mean).toFixed(1)
            }" r="2.5" fill="${color}"/>`
          ),
        );
      }
      const ticks = [0, 0.25, 0.5, 0.75, 1].map((v) =>
        `<line x1="${pad}" y1="${y(v)}" x2="${W - pad}" y2="${y(v)}" stroke="#ddd"/>` +
        `<text x="${pad - 4}" y="${y(v) + 4}" text-anchor="end" font-size="10">${v}</text>`
      ).join("");
      const axes =
        `<line x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}" stroke="#000"/>` +
        `<line x1="${pad}" y1="${pad}" x2="${pad}" y2="${H - pad}" stroke="#000"/>` +
        `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${
          esc(env)
        } · ${split}</text>` +
        `<text x="${W / 2}" y="${H - 12}" text-anchor="middle" font-size="11">` +
        `training samples (episodes, 0 … ${maxSamples})</text>`;
      panels.push(
        `<g transform="translate(${col * W},${row * H})">${ticks}${axes}${parts.join("")}</g>`,
      );
    });
  });
  const legendY = envs.length * H + 16;
  const legend = `<text x="10" y="${legendY}" font-size="12">` +
    arms.map((a) => `<tspan fill="${colorOf(a)}">${esc(a)}</tspan>`).join(" · ") + ": " +
    `mean success rate over ${seeds} seed(s); band: 95% t-interval over seeds</text>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W * SPLITS.length}" height="${
    envs.length * H + 24
  }"><rect width="100%" height="100%" fill="#fff"/>${panels.join("")}${legend}</svg>\n`;
}

/**
 * The same curves as Mermaid `xychart-beta` blocks for Markdown (README sections render them on
 * GitHub; no image is committed): one chart per (env, split), x = training samples, y = mean
 * success in percent, one line per arm in the colours of `learn.svg`. Mermaid draws no bands and
 * no legend, so the title names the arms in line order and the caption line after each block
 * gives each point's 95% t-interval half-width over seeds.
 */
export function learnMermaid(means: readonly MeanRow[], seeds: number): string[] {
  const envs = [...new Set(means.map((m) => m.env))];
  const arms = [...new Set(means.map((m) => m.arm))];
  const colorOf = (arm: string) => COLORS[arm] ?? SPARE[arms.indexOf(arm) % SPARE.length];
  const out: string[] = [];
  for (const env of envs) {
    for (const split of SPLITS) {
      const mine = means.filter((m) => m.env === env && m.split === split);
      if (mine.length === 0) continue;
      const samples = [...new Set(mine.map((m) => m.samples))].sort((a, b) => a - b);
      const present = arms.filter((a) => mine.some((m) => m.arm === a));
      const at = (arm: string, s: number) =>
        mine.find((m) => m.arm === arm && m.samples === s)?.success;
      const init = {
        themeVariables: { xyChart: { plotColorPalette: present.map(colorOf).join(", ") } },
      };
      out.push(
        "```mermaid",
        `%%{init: ${JSON.stringify(init)}}%%`,
        "xychart-beta",
        `  title "${env} · ${split}: ${present.join(", ")} (mean of ${seeds} seed(s))"`,
        `  x-axis "training samples" [${samples.join(", ")}]`,
        `  y-axis "success %" 0 --> 100`,
        ...present.map((arm) =>
          `  line [${
            samples.map((s) => {
              const v = at(arm, s)?.mean;
              return v === undefined || !Number.isFinite(v) ? "0" : (100 * v).toFixed(1);
            }).join(", ")
          }]`
        ),
        "```",
        "",
        `${env} · ${split}, ± 95% t-interval over seeds at ${samples.join(" / ")} samples: ${
          present.map((arm) =>
            `${arm} ${
              samples.map((s) => {
                const h = at(arm, s)?.half;
                return h === undefined || !Number.isFinite(h) ? "n/a" : `±${(100 * h).toFixed(1)}`;
              }).join(" / ")
            }`
          ).join("; ")
        }`,
        "",
      );
    }
  }
  return out;
}
