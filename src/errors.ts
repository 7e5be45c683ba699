// The one error hierarchy of the gateway: every error src throws is a SitegateError (or a
// subclass that fixes its code), with a stable code, a transient flag that decides retries,
// and optional structured details. Control flow looks at the code, never the message. What
// each code answers (HTTP status, fleet command answer, CLI exit code) is the one table in
// services/errors.ts, not here.

export type ErrorCode =
  | "CONFIG_INVALID"
  | "STORAGE_UNAVAILABLE"
  | "STORAGE_CORRUPT"
  | "MODBUS_TIMEOUT"
  | "MODBUS_EXCEPTION"
  | "MODBUS_CRC"
  | "MODBUS_DISCONNECTED"
  | "MODBUS_BAD_RESPONSE"
  | "DEVICE_TIMEOUT"
  | "DEVICE_OFFLINE"
  | "PROFILE_INVALID"
  | "PROFILE_NOT_FOUND"
  | "PAIRING_FAILED"
  | "DEVICE_MISMATCH"
  | "REGISTRY_WRITE_FAILED"
  | "CONTROL_VALUE_INVALID"
  | "CONTROL_NOT_CONFIRMED"
  | "DEVICE_NOT_FOUND"
  | "INVALID_REQUEST"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "CONFLICT"
  | "BUSY"
  | "RATE_LIMITED"
  | "PAYLOAD_TOO_LARGE"
  | "UNSUPPORTED_MEDIA_TYPE"
  | "UNAVAILABLE"
  | "TIMEOUT"
  | "USAGE"
  | "BUNDLE_REFUSED"
  | "UPDATE_FAILED"
  /** A broken promise inside the gateway itself (a part asked for before it started, a missing asset): a bug, never the caller's fault. */
  | "INTERNAL";

export interface ErrorDetail {
  path: string;
  message: string;
}

export class SitegateError extends Error {
  readonly code: ErrorCode;
  readonly transient: boolean;
  readonly details: ErrorDetail[];

  constructor(code: ErrorCode, message: string, opts: { transient?: boolean; details?: ErrorDetail[]; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "SitegateError";
    this.code = code;
    this.transient = opts.transient ?? false;
    this.details = opts.details ?? [];
  }
}

export function isSitegateError(e: unknown, code?: ErrorCode): e is SitegateError {
  return e instanceof SitegateError && (code === undefined || e.code === code);
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
