// The one way into dispatch from outside: validate a dispatch request body (spec 2.3,
// DESIGN B4) and submit it. The HTTPS route (/dr) and the MQTT `dr` command both call
// this, so they accept and reject exactly the same requests with the same details.
import { SitegateError } from "../errors.js";
import type { Logger } from "../log.js";
import { validateDispatch, type DispatchRequest } from "./request.js";
import type { Receipt } from "./dispatcher.js";

/** What a front end needs of dispatch. */
export interface DispatchSubmit {
  /** The receipts; once final (B4): a running event the request cancels answers once its devices are released, at most 2 s later. */
  submitFinal(req: DispatchRequest): Receipt[] | Promise<Receipt[]>;
  /** Group commit: concurrent requests share one fsync (the HTTPS route). */
  submitBatched(req: DispatchRequest): Promise<Receipt[]>;
}

/**
 * The request, or INVALID_REQUEST with a path per problem (one bad event rejects it all).
 * Event fields the spec does not name are dropped and logged at debug, never refused.
 */
function validated(body: unknown, log?: Pick<Logger, "debug">): DispatchRequest {
  const v = validateDispatch(body);
  if (!v.ok) throw new SitegateError("INVALID_REQUEST", "the dispatch request is invalid; nothing was stored", { details: v.details });
  if (v.ignored.length)
    log?.debug({ ignored: v.ignored.slice(0, 20), count: v.ignored.length }, "dispatch request: unknown event fields ignored");
  return v.data;
}

/** Validates the whole request and returns the committed receipts (later, when it cancels a running event: submitFinal). */
export function submitDispatch(dispatch: DispatchSubmit, body: unknown, log?: Pick<Logger, "debug">): Receipt[] | Promise<Receipt[]> {
  return dispatch.submitFinal(validated(body, log));
}

/** submitDispatch with group commit: the receipts once the shared transaction committed. */
export async function submitDispatchBatched(dispatch: DispatchSubmit, body: unknown, log?: Pick<Logger, "debug">): Promise<Receipt[]> {
  return dispatch.submitBatched(validated(body, log));
}
