// Device sync, GET /{api_version}/api/gateway/{site_id}/devicesync (spec 4.2, DESIGN B5),
// a webhook-host route: `config: { auth: "webhook" }` has the source IP, X-API-Key, version
// and site checked before anything else (src/api/guard.ts).
import type { FastifyPluginAsync } from "fastify";
import type { ApiContext } from "./context.js";
import type { RegisteredDevice } from "../devices/types.js";

/** device_op_mode is published for inverters; device_max_power for inverters and loads that have one. */
const INVERTER_TYPES = new Set([10, 11]);

export function gatewayRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    // The answer changes only with the registry or a device's op mode: serialize it once.
    let registryVersion = 0;
    ctx.registry.onChange(() => registryVersion++);
    let cache: { version: number; modes: string; body: string } | null = null;
    app.get<{ Params: { version: string; site: string } }>("/:version/api/gateway/:site/devicesync", { config: { auth: "webhook" } }, async (_req, reply) => {
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
