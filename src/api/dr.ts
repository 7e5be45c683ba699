// POST /{api_version}/api/gateway/{site_id}/dr (spec 4.3, DESIGN B4): the webhook guard
// (allowlist, X-API-Key, version and site), JSON only, then validation of the whole
// request (one bad event rejects it, with a path per problem), then receipts that are
// committed before the answer.
import type { FastifyPluginAsync } from "fastify";
import { submitDispatch, type DispatchApi } from "../dispatch/submit.js";
import type { ApiContext } from "./server.js";
import { webhookGuard } from "./gateway.js";
import { requireJson } from "./admin.js";
export type { DispatchApi };

export function drRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    const guard = webhookGuard(ctx);
    app.post<{ Params: { version: string; site: string } }>("/:version/api/gateway/:site/dr", { preHandler: guard }, async (req) => {
      requireJson(req);
      return submitDispatch(ctx.dispatch, req.body); // shared with the MQTT `dr` command
    });
  };
}
