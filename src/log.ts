// Logging: pino JSON lines on stdout (journald reads them), pretty when stdout is a TTY.
// Parts log through child loggers: log.child({ part: "modbus", bus: "rtu1" }).
import { pino, type Logger, type LevelWithSilent } from "pino";

export type { Logger };

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

export function createLogger(opts: { level?: string; pretty?: boolean; destination?: NodeJS.WritableStream } = {}): Logger {
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
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A logger that writes nothing: for unit tests and CLI tools. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
