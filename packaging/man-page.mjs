// man-page.mjs NAME CLI VERSION TIMESTAMP: a man page (roff, on stdout) made from the command's
// own `--help` and, for sitegate, every command's `--help`: the page cannot drift from the
// program. TIMESTAMP (seconds, the changelog entry's) dates it, so a build is reproducible.
import { execFileSync } from "node:child_process";

const [name, cli, version, timestamp] = process.argv.slice(2);
const help = (...args) => execFileSync(process.execPath, [cli, ...args, "--help"], { encoding: "utf8" }).trimEnd();
// roff: backslashes and hyphens escaped, no line may start with a control character
const esc = (s) => s.replace(/\\/g, "\\e").replace(/-/g, "\\-").replace(/^([.'])/gm, "\\&$1");
const date = new Date(Number(timestamp) * 1000).toISOString().slice(0, 10);
const out = [`.TH ${name.toUpperCase()} 1 "${date}" "${name} ${version}" "User Commands"`, ".SH NAME"];
const block = (text) => [".nf", esc(text), ".fi"];

if (name === "sitegate") {
  const top = help();
  const summary = /^sitegate \S+: (.*)$/m.exec(top)?.[1] ?? "the site controller runtime";
  const commands = (/^commands:\n((?: {2}\S.*\n?)+)/m.exec(top)?.[1] ?? "").split("\n").map((l) => l.trim().split(/\s+/)[0]).filter(Boolean);
  out.push(`sitegate \\- ${esc(summary)}`, ".SH SYNOPSIS", ".B sitegate", ".I command", "[\\fIoptions\\fR]", ".br", ".B sitegate \\-\\-version");
  out.push(".SH DESCRIPTION", esc(`${summary[0].toUpperCase()}${summary.slice(1)}.`), "Every command that reads a config takes");
  out.push(".B \\-\\-config", ".I FILE", "and defaults to", ".IR /etc/sitegate/config.yaml .", "Exit status: 0 ok, 1 runtime failure, 2 bad usage or bad config.");
  out.push(".SH COMMANDS");
  for (const c of commands) {
    const lines = help(c).split("\n");
    const at = lines.findIndex((l) => l.startsWith("usage:"));
    const about = lines.slice(0, Math.max(at, 0)).join(" ");
    out.push(".TP", `.B ${esc(c)}`, esc(about), ...block(lines.slice(Math.max(at, 0)).join("\n")));
  }
  out.push(".SH FILES", ".TP", ".I /etc/sitegate/config.yaml", "the config (written by", ".BR \"sitegate init\" ),", "mode 0640, root:sitegate");
  out.push(".TP", ".I /var/lib/sitegate", "the data directory (SQLite databases, update markers)", ".TP", ".I /opt/sitegate/current", "the running release");
  out.push(".SH SEE ALSO", ".BR sitegate\\-sim (1),", ".I /usr/share/doc/sitegate/config.example.yaml");
} else {
  const lines = help().split("\n");
  out.push(`${name} \\- the bench simulator of a sitegate site (Modbus devices over TCP and RS\\-485 ptys)`);
  out.push(".SH SYNOPSIS", ...block(lines[0].replace(/^usage: /, "")), ".SH DESCRIPTION", ...block(lines.slice(1).join("\n").replace(/^ +/gm, "")));
  out.push(".SH FILES", ".TP", ".I /usr/share/sitegate/scenarios/bench.yaml", "the bench scenario that", ".B sitegate\\-sim.service", "runs");
  out.push(".SH SEE ALSO", ".BR sitegate (1)");
}
process.stdout.write(out.join("\n") + "\n");
