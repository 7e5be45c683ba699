// POST /{api_version}/api/gateway/{site_id}/dr (spec 4.3, DESIGN B4): the webhook guard
// (allowlist, X-API-Key, version and site), JSON only, then validation of the whole
// request (one bad event rejects it, with a path per problem), then receipts that are
// committed before the answer.
import type { FastifyPluginAsync } from "fastify";
import { validateDispatch, type DispatchRequest } from "../dispatch/request.js";
import type { Receipt } from "../dispatch/dispatcher.js";
import type { ApiContext } from "./server.js";
import { webhookGuard } from "./gateway.js";
import { requireJson } from "./admin.js";
import { badRequest } from "./errors.js";

/** What the route needs of dispatch: the same call the MQTT command will use. */
export interface DispatchApi {
  submit(req: DispatchRequest): Receipt[];
}

export function drRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    const guard = webhookGuard(ctx);
    app.post<{ Params: { version: string; site: string } }>("/:version/api/gateway/:site/dr", { preHandler: guard }, async (req) => {
      requireJson(req);
      const v = validateDispatch(req.body);
      if (!v.ok) throw badRequest("the dispatch request is invalid; nothing was stored", v.details);
      return ctx.dispatch.submit(v.data);
    });
  };
}
