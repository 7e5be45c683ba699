// The one way into dispatch from outside: validate a dispatch request body (spec 2.3,
// DESIGN B4) and submit it. The HTTPS route (/dr) and the MQTT `dr` command both call
// this, so they accept and reject exactly the same requests with the same details.
import { SitegateError } from "../errors.js";
import { validateDispatch, type DispatchRequest } from "./request.js";
import type { Receipt } from "./dispatcher.js";

/** What a front end needs of dispatch. */
export interface DispatchSubmit {
  submit(req: DispatchRequest): Receipt[];
}

/** Validates the whole request (one bad event rejects it) and returns the committed receipts. */
export function submitDispatch(dispatch: DispatchSubmit, body: unknown): Receipt[] {
  const v = validateDispatch(body);
  if (!v.ok) throw new SitegateError("INVALID_REQUEST", "the dispatch request is invalid; nothing was stored", { details: v.details });
  return dispatch.submit(v.data);
}
