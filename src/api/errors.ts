// HTTP errors of the API: one body shape for every non-2xx (DESIGN B3), and the one
// table that maps SitegateError codes to statuses.
import type { ErrorCode, ErrorDetail } from "../errors.js";
import { SitegateError } from "../errors.js";

export interface ErrorBody {
  error: string;
  message: string;
  details: ErrorDetail[];
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): ErrorBody {
    return { error: this.code, message: this.message, details: this.details };
  }
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

export function fromSitegateError(e: SitegateError): HttpError {
  const [status, code] = STATUS[e.code] ?? [500, "internal"];
  return new HttpError(status, code, status === 500 ? "internal error" : e.message, e.details);
}

export const badRequest = (message: string, details: ErrorDetail[] = []) => new HttpError(400, "invalid_request", message, details);
export const unauthorized = (message: string, headers: Record<string, string> = {}) => new HttpError(401, "unauthorized", message, [], headers);
export const forbidden = (message: string) => new HttpError(403, "forbidden", message);
export const notFound = (message: string) => new HttpError(404, "not_found", message);
export const unavailable = (message: string) => new HttpError(503, "unavailable", message);
