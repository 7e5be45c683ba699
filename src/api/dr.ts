// POST /{api_version}/api/gateway/{site_id}/dr (spec 4.3, DESIGN B4): the webhook guard
// (allowlist, X-API-Key, version and site: `config: { auth: "webhook" }`, checked before the
// body is read, src/api/guard.ts), JSON only, then validation of the whole request (one bad
// event rejects it, with a path per problem), then receipts that are committed before the
// answer.
import type { FastifyPluginAsync } from "fastify";
import { submitDispatchBatched } from "../dispatch/submit.js";
import type { ApiContext } from "./context.js";
import { requireJson } from "./admin.js";

export function drRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.post("/:version/api/gateway/:site/dr", { config: { auth: "webhook" } }, async (req) => {
      requireJson(req);
      return submitDispatchBatched(ctx.dispatch, req.body, ctx.log); // the same validation as the MQTT `dr` command
    });
  };
}
