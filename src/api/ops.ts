// Operations routes: GET /healthz, GET /metrics (Prometheus text), both for the addresses
// in http.metrics_allow (loopback by default); GET /openapi.json, generated from the same
// zod schemas that validate the requests.
import { BlockList } from "node:net";
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { z } from "zod";
import { VERSION } from "../version.js";
import type { ApiContext, MetricFamily, MetricsSource } from "./context.js";
import { addCidr, ipInList } from "./auth.js";
import { forbidden } from "./errors.js";
import { statusOf } from "../services/errors.js";
import { dispatchRequest, receiptSchema } from "../dispatch/request.js";
import { configureBody, configureResponse, deviceSyncResponse, errorBody, oauthError, tokenForm, tokenResponse } from "./schemas.js";

function prometheus(src: MetricsSource): string {
  const lines: string[] = [];
  // One family per name: two listeners report the same connection figures under their labels.
  const families = new Map<string, MetricFamily>();
  for (const g of src.gauges()) {
    const seen = families.get(g.name);
    if (seen) seen.values = [...seen.values, ...g.values];
    else families.set(g.name, { ...g });
  }
  for (const g of families.values()) {
    lines.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} ${g.type}`);
    for (const v of g.values) {
      const labels = v.labels
        ? `{${Object.entries(v.labels)
            .map(([k, x]) => `${k}="${x.replace(/["\\\n]/g, "_")}"`)
            .join(",")}}`
        : "";
      lines.push(`${g.name}${v.suffix ?? ""}${labels} ${Number.isFinite(v.value) ? v.value : 0}`);
    }
  }
  return lines.join("\n") + "\n";
}

export function openApi(ctx: ApiContext): Record<string, unknown> {
  const js = (s: z.ZodType) => z.toJSONSchema(s, { io: "input", unrepresentable: "any" });
  const json = (s: z.ZodType) => ({ content: { "application/json": { schema: js(s) } } });
  const errors = {
    "400": { description: "invalid request", ...json(errorBody) },
    "401": { description: "unauthorized", ...json(errorBody) },
    "403": { description: "forbidden", ...json(errorBody) },
    "404": { description: "not found", ...json(errorBody) },
    "413": { description: "body over 256 KiB", ...json(errorBody) },
    "415": { description: "wrong content type", ...json(errorBody) },
    "429": { description: "rate limited", ...json(errorBody) },
    "503": { description: "storage cannot commit", ...json(errorBody) },
  };
  const v = ctx.config.api_version;
  return {
    openapi: "3.1.0",
    info: { title: "sitegate partner interface", version: VERSION },
    components: {
      securitySchemes: {
        apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
        bearer: { type: "http", scheme: "bearer" },
        clientBasic: {
          type: "http",
          scheme: "basic",
          description: "client_id with an empty client_secret (RFC 6749 2.3.1), instead of the form field",
        },
      },
    },
    paths: {
      "/connect/token": {
        post: {
          summary: "Obtain a token (OAuth 2.0 password grant)",
          security: [{}, { clientBasic: [] }],
          requestBody: { content: { "application/x-www-form-urlencoded": { schema: js(tokenForm) } } },
          responses: {
            "200": { description: "token", ...json(tokenResponse) },
            "400": { description: "RFC 6749 error", ...json(oauthError) },
            "401": { description: "invalid_client", ...json(oauthError) },
            "403": { description: "source not on auth.admin_allowlist", ...json(oauthError) },
            "429": { description: "too many failed attempts from this source or for this username; see Retry-After", ...json(errorBody) },
          },
        },
      },
      [`/${v}/api/gateway/{site_id}/devicesync`]: {
        get: {
          summary: "Device sync",
          security: [{ apiKey: [] }],
          parameters: [{ name: "site_id", in: "path", required: true, schema: { type: "string" } }],
          responses: { "200": { description: "devices", ...json(deviceSyncResponse) }, ...errors },
        },
      },
      [`/${v}/api/gateway/{site_id}/dr`]: {
        post: {
          summary: "Submit dispatch events (receipts committed before the answer)",
          security: [{ apiKey: [] }],
          parameters: [{ name: "site_id", in: "path", required: true, schema: { type: "string" } }],
          requestBody: json(dispatchRequest),
          responses: {
            "200": { description: "one receipt per event, in request order", ...json(receiptSchema) },
            "409": { description: "event changed after its start", ...json(errorBody) },
            ...errors,
          },
        },
      },
      "/gateway/admin/device/configure": {
        put: {
          summary: "Pair and configure devices",
          security: [{ bearer: [] }],
          parameters: [
            { name: "organizationId", in: "query", required: true, schema: { type: "string" } },
            { name: "moleculeId", in: "query", required: true, schema: { type: "string" } },
          ],
          requestBody: json(configureBody(ctx.connector)),
          responses: { "200": { description: "per-device results", ...json(configureResponse) }, ...errors },
        },
      },
    },
  };
}

export function opsRoutes(ctx: ApiContext): FastifyPluginAsync {
  const allow = new BlockList();
  for (const c of ctx.config.http.metrics_allow) addCidr(allow, c);
  const guard = async (req: FastifyRequest) => {
    if (!ipInList(allow, req.ip)) throw forbidden(`source address ${req.ip} may not read ${req.url}`);
  };
  const started = Date.now();
  return async (app) => {
    app.get("/healthz", { preHandler: guard, config: { rateLimit: false } }, async (_req, reply) => {
      let storage = "ok";
      try {
        ctx.storage.db.prepare("SELECT 1").get();
      } catch {
        storage = "unavailable";
      }
      const devices = ctx.devices.list();
      const online = devices.filter((d) => d.health().online).length;
      const ok = storage === "ok";
      const uplink = ctx.uplink?.health() ?? { warnings: [] };
      const detail = devices.map((d) => {
        const h = d.health();
        return {
          device_id: d.id,
          fully_configured: d.info().fully_configured,
          online: h.online,
          last_ok_at: h.last_ok_at,
          last_error: h.last_error,
          consecutive_failures: h.consecutive_failures,
        };
      });
      return reply.code(ok ? 200 : statusOf("STORAGE_UNAVAILABLE")).send({
        status: ok ? "ok" : "unavailable",
        version: VERSION,
        site_id: ctx.config.site_id,
        uptime_s: Math.round((Date.now() - started) / 1000),
        storage,
        warnings: ctx.metrics.warnings?.() ?? [],
        devices: { configured: devices.length, online, detail },
        uplink,
      });
    });
    app.get("/metrics", { preHandler: guard, config: { rateLimit: false } }, async (_req, reply) => {
      return reply.type("text/plain; version=0.0.4").send(prometheus(ctx.metrics));
    });
    // Built on first request: the JSON Schema conversion is code and garbage the daemon
    // would otherwise carry from start-up for a document that is rarely fetched.
    let doc: Record<string, unknown> | null = null;
    app.get("/openapi.json", async () => (doc ??= openApi(ctx)));
  };
}
