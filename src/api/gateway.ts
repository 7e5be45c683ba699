// The webhook-host routes, /{api_version}/api/gateway/{site_id}/...: source-IP allowlist
// (403), X-API-Key (401), then the site (404). Device sync lives here; dispatch (/dr)
// plugs in beside it with the same guard.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ApiContext } from "./server.js";
import { deviceSyncView, syncedDevices } from "./services.js";
import { forbidden, notFound, unauthorized } from "./errors.js";

export function webhookGuard(ctx: ApiContext) {
  return async (req: FastifyRequest<{ Params: { version: string; site: string } }>) => {
    if (!ctx.credentials.ipAllowed(req.ip)) throw forbidden(`source address ${req.ip} is not on the allowlist`);
    const key = req.headers["x-api-key"];
    if (typeof key !== "string" || key.length === 0) throw unauthorized("X-API-Key header is missing");
    if (!ctx.credentials.checkApiKey(key)) throw unauthorized("X-API-Key is not valid");
    if (req.params.version !== ctx.config.api_version) throw notFound(`API version "${req.params.version}" is not served here (use ${ctx.config.api_version})`);
    if (req.params.site !== ctx.config.site_id) throw notFound(`site "${req.params.site}" is not this gateway's`);
  };
}

export function gatewayRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    const guard = webhookGuard(ctx);
    // The answer changes only with the registry or a device's op mode: serialize it once.
    let registryVersion = 0;
    ctx.registry.onChange(() => registryVersion++);
    let cache: { version: number; modes: string; body: string } | null = null;
    app.get<{ Params: { version: string; site: string } }>("/:version/api/gateway/:site/devicesync", { preHandler: guard }, async (_req, reply) => {
      const listed = syncedDevices(ctx.registry);
      const modes = listed.map((d) => ctx.health.health(d.config.device_id)?.op_mode ?? 0).join("");
      if (!cache || cache.version !== registryVersion || cache.modes !== modes) {
        cache = { version: registryVersion, modes, body: JSON.stringify(deviceSyncView(ctx.config.site_id, listed, ctx.health)) };
      }
      return reply.type("application/json; charset=utf-8").send(cache.body);
    });
  };
}
