/**
 * CSV writing (RFC 4180): comma separated, CRLF line ends, fields quoted when they hold a comma,
 * quote, CR or LF, quotes doubled. Numbers are written with JS `String()` (shortest round-trip).
 */

/** A cell value: null/undefined become empty fields; objects are written as JSON. */
export type CsvValue = string | number | boolean | null | undefined | Record<string, unknown>;

/** Escapes one field per RFC 4180. */
export function csvField(value: CsvValue): string {
  if (value === null || value === undefined) return "";
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Renders a header row and data rows (each the same length as the header) as one CSV string. */
export function toCsv(header: readonly string[], rows: readonly (readonly CsvValue[])[]): string {
  const lines = [header.map(csvField).join(",")];
  for (const row of rows) lines.push(row.map(csvField).join(","));
  return lines.join("\r\n") + "\r\n";
}
