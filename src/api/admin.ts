// PUT /gateway/admin/device/configure?organizationId=&moleculeId= (spec 4.6, DESIGN B5):
// bearer token (401), organization (403), site (404) before the body is read
// (`config: { auth: "admin" }`, src/api/guard.ts), then content type (415) and body (400);
// then pairing and check writes per device, results per device in one 200.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { integrationName, type DeviceConfig } from "../config/device-schema.js";
import { issuesToDetails } from "../config/issues.js";
import { configureDevices } from "../devices/configure.js";
import type { ErrorDetail } from "../errors.js";
import type { ApiContext } from "./context.js";
import { badRequest, HttpError } from "./errors.js";
import { configureBody } from "./schemas.js";

export function requireJson(req: FastifyRequest): void {
  const type = String(req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json") throw new HttpError(415, "unsupported_media_type", "the body must be application/json");
}

/** Rules beyond the schema: known profiles, our organization, configured RTU ports, unique ids. */
function crossCheck(devices: DeviceConfig[], ctx: ApiContext): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  const seen = new Set<string>();
  devices.forEach((d, i) => {
    const org = d.device_integration.slice(0, d.device_integration.indexOf("/"));
    if (org !== ctx.config.organization_id) out.push({ path: `devices[${i}].device_integration`, message: `organization "${org}" is not this gateway's` });
    const name = integrationName(d);
    if (!ctx.profiles.has(name)) out.push({ path: `devices[${i}].device_integration`, message: `unknown integration "${name}" (known: ${ctx.profiles.names().join(", ")})` });
    if (d.mb_type === 1 && !(String(d.mb_rtu_no) in ctx.config.rtu_ports)) {
      out.push({ path: `devices[${i}].mb_rtu_no`, message: `RTU port ${d.mb_rtu_no} is not configured on this gateway (${Object.keys(ctx.config.rtu_ports).join(", ") || "none"})` });
    }
    if (seen.has(d.device_id)) out.push({ path: `devices[${i}].device_id`, message: `device_id "${d.device_id}" appears twice in the request` });
    seen.add(d.device_id);
  });
  return out;
}

export function adminRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.put("/gateway/admin/device/configure", { config: { auth: "admin" } }, async (req) => {
      requireJson(req);
      const body = configureBody.safeParse(req.body);
      if (!body.success) throw badRequest("the request body is invalid; nothing was changed", issuesToDetails(body.error.issues));
      const cross = crossCheck(body.data.devices, ctx);
      if (cross.length) throw badRequest("the request body is invalid; nothing was changed", cross);
      const results = await configureDevices(body.data.devices, { connector: ctx.connector, registry: ctx.registry, rtuPorts: ctx.config.rtu_ports, log: ctx.log });
      return { devices: results.map((r) => ({ device_id: r.device_id, status: r.status, ...(r.code ? { code: r.code } : {}), message: r.message })) };
    });
  };
}
