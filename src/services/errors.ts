// What an error answers at every front end: the one table from codes to the HTTP status and
// B3 error code (api/ and ui/ send them as the HTTP answer, fleet/ inside its command
// answer with the same status) and to the CLI's exit code. No other module maps a code or
// an error class to a status.
import { SitegateError, type ErrorCode, type ErrorDetail } from "../errors.js";

export interface ErrorAnswer {
  status: number;
  code: string;
  message: string;
  details: ErrorDetail[];
}

/** The CLI's exit codes: 1 a failure, 2 bad usage (the command line, the config, a refused bundle). */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

type Row = [status: number, code: string, exit?: number];
const INTERNAL: Row = [500, "internal"];

// A Record, not a Partial: a new code does not compile until it has its answer here.
const ANSWERS: Record<ErrorCode, Row> = {
  INVALID_REQUEST: [400, "invalid_request"],
  CONFIG_INVALID: [400, "invalid_request", EXIT_USAGE],
  PROFILE_NOT_FOUND: [400, "invalid_request"],
  USAGE: [400, "invalid_request", EXIT_USAGE],
  BUNDLE_REFUSED: [400, "invalid_request", EXIT_USAGE],
  UNAUTHORIZED: [401, "unauthorized"],
  FORBIDDEN: [403, "forbidden"],
  NOT_FOUND: [404, "not_found"],
  DEVICE_NOT_FOUND: [404, "not_found"],
  CONFLICT: [409, "conflict"],
  BUSY: [409, "conflict"],
  PAYLOAD_TOO_LARGE: [413, "payload_too_large"],
  UNSUPPORTED_MEDIA_TYPE: [415, "unsupported_media_type"],
  RATE_LIMITED: [429, "rate_limited"],
  STORAGE_UNAVAILABLE: [503, "unavailable"],
  UNAVAILABLE: [503, "unavailable"],
  // Inside the gateway only: a front end that sees one of these has a bug, so 500.
  STORAGE_CORRUPT: INTERNAL,
  MODBUS_TIMEOUT: INTERNAL,
  MODBUS_EXCEPTION: INTERNAL,
  MODBUS_CRC: INTERNAL,
  MODBUS_DISCONNECTED: INTERNAL,
  MODBUS_BAD_RESPONSE: INTERNAL,
  DEVICE_TIMEOUT: INTERNAL,
  DEVICE_OFFLINE: INTERNAL,
  PROFILE_INVALID: INTERNAL,
  PAIRING_FAILED: INTERNAL,
  DEVICE_MISMATCH: INTERNAL,
  REGISTRY_WRITE_FAILED: INTERNAL,
  CONTROL_VALUE_INVALID: INTERNAL,
  CONTROL_NOT_CONFIRMED: INTERNAL,
  UPDATE_FAILED: INTERNAL,
  TIMEOUT: INTERNAL,
  INTERNAL,
};

/** A 500's message (maybe internal detail) is not shown. */
export function errorAnswer(e: SitegateError): ErrorAnswer {
  const [status, code] = ANSWERS[e.code];
  return { status, code, message: status === 500 ? "internal error" : e.message, details: e.details };
}

/** The HTTP status of a code (for an answer that is not the JSON error body, e.g. a plain-text page). */
export function statusOf(code: ErrorCode): number {
  return ANSWERS[code][0];
}

/** The exit code of a CLI command that ended with this error. */
export function exitCode(e: unknown): number {
  return (e instanceof SitegateError && ANSWERS[e.code][2]) || EXIT_FAILURE;
}

// The HTTP framework's own refusals (a body it cannot parse, a limit) carry a 4xx statusCode.
const FRAMEWORK: Record<number, ErrorCode> = {
  404: "NOT_FOUND",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "RATE_LIMITED",
};

/**
 * Any error a front end caught, as a SitegateError: ours as they are, the HTTP framework's
 * 4xx by its status, anything else INTERNAL (a bug: the front end logs every 500).
 */
export function asSitegateError(e: unknown): SitegateError {
  if (e instanceof SitegateError) return e;
  const status = (e as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    const message = e instanceof Error ? e.message : String(e);
    return new SitegateError(FRAMEWORK[status] ?? "INVALID_REQUEST", message, { cause: e });
  }
  return new SitegateError("INTERNAL", "internal error", { cause: e });
}
