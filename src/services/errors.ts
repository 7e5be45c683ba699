// Which answer a SitegateError gets from any front end: the one table of codes to statuses
// and B3 error codes. api/ sends it as an HTTP status, fleet/ inside its command answer.
import type { ErrorCode, ErrorDetail, SitegateError } from "../errors.js";

export interface ErrorAnswer {
  status: number;
  code: string;
  message: string;
  details: ErrorDetail[];
}

const STATUS: Partial<Record<ErrorCode, [number, string]>> = {
  INVALID_REQUEST: [400, "invalid_request"],
  CONFIG_INVALID: [400, "invalid_request"],
  PROFILE_NOT_FOUND: [400, "invalid_request"],
  UNAUTHORIZED: [401, "unauthorized"],
  FORBIDDEN: [403, "forbidden"],
  NOT_FOUND: [404, "not_found"],
  DEVICE_NOT_FOUND: [404, "not_found"],
  CONFLICT: [409, "conflict"],
  STORAGE_UNAVAILABLE: [503, "unavailable"],
  UNAVAILABLE: [503, "unavailable"],
};

/** An unmapped code is a bug here, so its message (maybe internal detail) is not shown. */
export function errorAnswer(e: SitegateError): ErrorAnswer {
  const [status, code] = STATUS[e.code] ?? [500, "internal"];
  return { status, code, message: status === 500 ? "internal error" : e.message, details: e.details };
}
