// Device sync, GET /{api_version}/api/gateway/{site_id}/devicesync (spec 4.2, DESIGN B5),
// a webhook-host route: `config: { auth: "webhook" }` has the source IP, X-API-Key, version
// and site checked before anything else (src/api/guard.ts).
import type { FastifyPluginAsync } from "fastify";
import type { ApiContext } from "./context.js";
import { deviceSyncView, syncState, syncedDevices } from "../services/devices.js";

export function gatewayRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    // The answer changes only with the device list, a device's op mode or its reachability: serialize it once.
    let cache: { version: number; modes: string; body: string } | null = null;
    app.get<{ Params: { version: string; site: string } }>(
      "/:version/api/gateway/:site/devicesync",
      { config: { auth: "webhook" } },
      async (_req, reply) => {
        const listed = syncedDevices(ctx.devices);
        const modes = syncState(listed);
        if (!cache || cache.version !== ctx.devices.version || cache.modes !== modes) {
          cache = { version: ctx.devices.version, modes, body: JSON.stringify(deviceSyncView(ctx.config.site_id, listed)) };
        }
        return reply.type("application/json; charset=utf-8").send(cache.body);
      },
    );
  };
}
