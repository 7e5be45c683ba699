// PUT /gateway/admin/device/configure?organizationId=&moleculeId= (spec 4.6, DESIGN B5):
// bearer token (401), organization (403), site (404), then the body; then pairing and
// check writes per device, results per device in one 200.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { issuesToDetails } from "../config/issues.js";
import { configureService } from "./services.js";
import type { ApiContext } from "./server.js";
import { badRequest, forbidden, HttpError, notFound, unauthorized } from "./errors.js";
import { configureQuery } from "./schemas.js";

export function bearerGuard(ctx: ApiContext) {
  return async (req: FastifyRequest) => {
    const h = req.headers.authorization;
    const m = typeof h === "string" ? /^Bearer\s+(\S+)$/i.exec(h) : null;
    if (!m) throw unauthorized("a Bearer token is required (POST /connect/token)", { "www-authenticate": 'Bearer realm="sitegate"' });
    const state = ctx.tokens.check(m[1]);
    if (state === "expired") throw unauthorized("the token has expired", { "www-authenticate": 'Bearer realm="sitegate", error="invalid_token", error_description="the token has expired"' });
    if (state !== "ok") throw unauthorized("the token is not valid", { "www-authenticate": 'Bearer realm="sitegate", error="invalid_token"' });
  };
}

export function requireJson(req: FastifyRequest): void {
  const type = String(req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json") throw new HttpError(415, "unsupported_media_type", "the body must be application/json");
}

export function adminRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.put("/gateway/admin/device/configure", { preHandler: bearerGuard(ctx) }, async (req) => {
      const q = configureQuery.safeParse(req.query ?? {});
      if (!q.success) throw badRequest("organizationId and moleculeId are required", issuesToDetails(q.error.issues));
      if (q.data.organizationId !== ctx.config.organization_id) throw forbidden(`organization "${q.data.organizationId}" is not this gateway's`);
      if (q.data.moleculeId !== ctx.config.site_id) throw notFound(`site "${q.data.moleculeId}" is not this gateway's`);
      requireJson(req);
      return configureService(req.body, ctx); // shared with the MQTT `configure` command
    });
  };
}
