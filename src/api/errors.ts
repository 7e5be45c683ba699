// HTTP errors of the API: one body shape for every non-2xx (DESIGN B3). Statuses come from
// the codes (services/errors.ts); HttpError only adds the headers an answer must carry
// (a WWW-Authenticate challenge, a Retry-After).
import { SitegateError, type ErrorCode, type ErrorDetail } from "../errors.js";
import type { ErrorAnswer } from "../services/errors.js";

export interface ErrorBody {
  error: string;
  message: string;
  details: ErrorDetail[];
}

/** A SitegateError whose HTTP answer carries headers; its status comes from its code like any other's. */
export class HttpError extends SitegateError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(code, message);
  }
}

export function errorBody(a: ErrorAnswer): ErrorBody {
  return { error: a.code, message: a.message, details: a.details };
}

export const badRequest = (message: string, details: ErrorDetail[] = []) => new SitegateError("INVALID_REQUEST", message, { details });
export const unauthorized = (message: string, headers: Record<string, string> = {}) => new HttpError("UNAUTHORIZED", message, headers);
export const forbidden = (message: string) => new SitegateError("FORBIDDEN", message);
export const notFound = (message: string) => new SitegateError("NOT_FOUND", message);
export const rateLimited = (message: string, headers: Record<string, string> = {}) => new HttpError("RATE_LIMITED", message, headers);
