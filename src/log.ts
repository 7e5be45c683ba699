// Logging: pino JSON lines on stdout (journald reads them), pretty when stdout is a TTY.
// Parts log through child loggers: log.child({ part: "modbus", bus: "rtu1" }).
// When stdout is the journal (systemd sets JOURNAL_STREAM to its device:inode), each line
// starts with its syslog priority, "<3>{...}" for an error, which journald strips and keeps
// as PRIORITY=, so `journalctl -u sitegate -p warning` shows warnings and worse.
import { pino, type Logger, type LevelWithSilent } from "pino";

export type { Logger };
export { errorText, journalAttached, syslogPriority } from "./util/journal.js";
import { journalAttached, syslogPriority } from "./util/journal.js";

const REDACT = [
  "password",
  "*.password",
  "password_hash",
  "*.password_hash",
  "*.users[*].password_hash",
  "key_hash",
  "*.key_hash",
  "*.api_keys[*].key_hash",
  "*.headers[*].value",
  "headers[*].value",
  "access_token",
  "*.access_token",
  "req.headers.authorization",
  'req.headers["x-api-key"]',
];

/** A pino destination that prefixes every JSON line with its "<priority>". */
export function journalDestination(out: { write(s: string): unknown }): { write(s: string): void } {
  return {
    write(line: string) {
      const m = /"level":(\d+)/.exec(line);
      out.write(`<${syslogPriority(m ? Number(m[1]) : 30)}>${line}`);
    },
  };
}

export function createLogger(
  opts: { level?: string; pretty?: boolean; destination?: NodeJS.WritableStream; journal?: boolean } = {},
): Logger {
  const level = (process.env.LOG_LEVEL ?? opts.level ?? "info") as LevelWithSilent;
  const pretty = opts.pretty ?? (process.stdout.isTTY === true && process.env.LOG_FORMAT !== "json");
  const options = {
    level,
    base: { name: "sitegate" },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT, censor: "[redacted]" },
    ...(pretty && !opts.destination
      ? { transport: { target: "pino-pretty", options: { colorize: true, translateTime: "SYS:HH:MM:ss.l" } } }
      : {}),
  };
  const journal = opts.journal ?? (!pretty && journalAttached());
  if (journal) return pino(options, journalDestination(opts.destination ?? pino.destination({ dest: 1, sync: true })));
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A logger that writes nothing: for unit tests and CLI tools. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
