// PUT /gateway/admin/device/configure?organizationId=&moleculeId= (spec 4.6, DESIGN B5):
// bearer token (401), organization (403), site (404) before the body is read
// (`config: { auth: "admin" }`, src/api/guard.ts), then content type (415) and body (400);
// then pairing and check writes per device, results per device in one 200.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ApiContext } from "./context.js";
import { SitegateError } from "../errors.js";
import { configureService } from "../services/devices.js";

export function requireJson(req: FastifyRequest): void {
  const type = (String(req.headers["content-type"] ?? "").split(";")[0] ?? "").trim().toLowerCase();
  if (type !== "application/json") throw new SitegateError("UNSUPPORTED_MEDIA_TYPE", "the body must be application/json");
}

export function adminRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.put("/gateway/admin/device/configure", { config: { auth: "admin" } }, async (req) => {
      requireJson(req);
      return configureService(req.body, ctx); // shared with the MQTT `configure` command
    });
  };
}
