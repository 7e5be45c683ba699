// A CONFIG_INVALID error as the CLI prints it (check-config, run and every command that
// loads the file): one problem a line, as compilers write them, so that an editor or a
// terminal can jump there, then the line itself under it (secret values masked):
//
//   /etc/sitegate/config.yaml:31:3: telemetry.poll_interval: unknown key; did you mean "poll_interval_ms"?
//      31 |   poll_interval: 500
//         |   ^
import type { ErrorDetail } from "../errors.js";
import type { ConfigProblem } from "./source.js";

/** Every problem of the error, each printed once. */
export function configProblemsText(details: readonly ErrorDetail[]): string {
  const lines: string[] = [];
  const seen = new Set<string>();
  for (const d of details as readonly ConfigProblem[]) {
    const what = d.path.startsWith("(") ? d.message : `${d.path}: ${d.message}`;
    const head = d.line !== undefined ? `${d.file}:${d.line}:${d.column}: ${what}` : d.file ? `${d.file}: ${what}` : `  ${what}`;
    if (seen.has(head)) continue;
    seen.add(head);
    lines.push(head, ...(d.snippet ?? []).map((s) => `    ${s}`));
  }
  return lines.join("\n");
}
