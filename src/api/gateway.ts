// The webhook-host routes, /{api_version}/api/gateway/{site_id}/...: source-IP allowlist
// (403), X-API-Key (401), then the site (404). Device sync lives here; dispatch (/dr)
// plugs in beside it with the same guard.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ApiContext } from "./context.js";
import type { RegisteredDevice } from "../devices/types.js";
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

/** device_op_mode is published for inverters; device_max_power for inverters and loads that have one. */
const INVERTER_TYPES = new Set([10, 11]);

export function gatewayRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    const guard = webhookGuard(ctx);
    // The answer changes only with the registry or a device's op mode: serialize it once.
    let registryVersion = 0;
    ctx.registry.onChange(() => registryVersion++);
    let cache: { version: number; modes: string; body: string } | null = null;
    app.get<{ Params: { version: string; site: string } }>("/:version/api/gateway/:site/devicesync", { preHandler: guard }, async (_req, reply) => {
      const listed = ctx.registry.list().filter((d) => d.fully_configured && d.descriptor);
      const modes = listed.map((d) => ctx.health.health(d.config.device_id)?.op_mode ?? 0).join("");
      if (!cache || cache.version !== registryVersion || cache.modes !== modes) {
        cache = { version: registryVersion, modes, body: JSON.stringify(deviceSync(ctx, listed)) };
      }
      return reply.type("application/json; charset=utf-8").send(cache.body);
    });
  };
}

/** The device sync answer (spec 2.2, DESIGN B5) for the fully configured devices. */
function deviceSync(ctx: ApiContext, listed: RegisteredDevice[]) {
  const devices = [...listed]
    .sort((a, b) => a.config.device_id.localeCompare(b.config.device_id))
    .map((d) => {
      const desc = d.descriptor!;
      const inverter = INVERTER_TYPES.has(desc.device_type);
      return {
        device_id: d.config.device_id,
        device_type: desc.device_type,
        ...(desc.max_power_w !== undefined ? { device_max_power: Math.round(desc.max_power_w) } : {}),
        ...(inverter ? { device_op_mode: ctx.health.health(d.config.device_id)?.op_mode ?? 0 } : {}),
        ...(d.config.device_name ? { name: d.config.device_name } : {}),
        capabilities: desc.capabilities,
      };
    });
  return { site_id: ctx.config.site_id, devices };
}
