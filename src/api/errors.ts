// HTTP errors of the API: one body shape for every non-2xx (DESIGN B3); the statuses of
// SitegateError codes come from services/errors.ts.
import type { ErrorDetail, SitegateError } from "../errors.js";
import { errorAnswer } from "../services/errors.js";

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

export function fromSitegateError(e: SitegateError): HttpError {
  const a = errorAnswer(e);
  return new HttpError(a.status, a.code, a.message, a.details);
}

export const badRequest = (message: string, details: ErrorDetail[] = []) => new HttpError(400, "invalid_request", message, details);
export const unauthorized = (message: string, headers: Record<string, string> = {}) =>
  new HttpError(401, "unauthorized", message, [], headers);
export const forbidden = (message: string) => new HttpError(403, "forbidden", message);
export const notFound = (message: string) => new HttpError(404, "not_found", message);
export const unavailable = (message: string) => new HttpError(503, "unavailable", message);
