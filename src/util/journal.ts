// The journal's side of stdout and stderr: whether a stream is the journal (systemd sets
// JOURNAL_STREAM to its device:inode), and the "<N>" syslog priority prefix journald strips
// from a line and keeps as its PRIORITY= (SyslogLevelPrefix). No pino here: the CLI uses it.
import { fstatSync } from "node:fs";

/** pino level number to syslog priority: fatal 2 (crit), error 3, warn 4, info 6, debug/trace 7. */
export function syslogPriority(level: number): number {
  if (level >= 60) return 2;
  if (level >= 50) return 3;
  if (level >= 40) return 4;
  if (level >= 30) return 6;
  return 7;
}

/** True when `fd` is the stream JOURNAL_STREAM names (so a redirected stdout is left alone). */
export function journalAttached(env: NodeJS.ProcessEnv = process.env, fd = 1): boolean {
  const m = /^(\d+):(\d+)$/.exec(env.JOURNAL_STREAM ?? "");
  if (!m) return false;
  try {
    const st = fstatSync(fd, { bigint: true });
    return st.dev.toString() === m[1] && st.ino.toString() === m[2];
  } catch {
    return false;
  }
}

/**
 * An error message for stderr: when stderr is the journal (a unit's ExecStartPre, such as
 * check-config), each line gets the "<3>" prefix, so journald files it at priority err.
 */
export function errorText(text: string, env: NodeJS.ProcessEnv = process.env): string {
  if (!journalAttached(env, 2)) return text;
  return text.replace(/^(?=.)/gm, `<${syslogPriority(50)}>`);
}
