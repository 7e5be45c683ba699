// Who may call a route, checked before the body is read: installGuards() turns a route's
// `config: { auth: "webhook" | "admin" }` into its last onRequest hook (after the rate
// limit), refuses to register a route under the webhook or admin prefix that does not
// declare it, and authenticates an unserved path under the webhook prefix before its 404.
// The checks and their order, and why: docs/security.md ("How a route says who may call it").
import type { Server } from "node:https";
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler, onRequestHookHandler } from "fastify";
import { issuesToDetails } from "../util/zod-issues.js";
import type { ApiContext } from "./context.js";
import { badRequest, forbidden, notFound, rateLimited, unauthorized } from "./errors.js";
import { HashBusyError } from "../util/secret-hash.js";
import { bearerToken } from "./headers.js";
import type { KeyCheck } from "./auth.js";
import { sourceKey } from "./throttle.js";
import { configureQuery } from "./schemas.js";
import { SitegateError } from "../errors.js";

export type AuthKind = "webhook" | "admin";
type Guard = onRequestAsyncHookHandler<Server>;

declare module "fastify" {
  interface FastifyContextConfig {
    /** Who may call the route: see src/api/guard.ts. */
    auth?: AuthKind;
  }
}

/** /{api_version}/api/gateway/{site_id}/..., as a route pattern or a literal path. */
const WEBHOOK_PATH = /^\/([^/]+)\/api\/gateway\/([^/]+)\//;
const ADMIN_PATH = /^\/gateway\/admin\//;

/** The auth a route's path demands, if any. */
export function requiredAuth(url: string): AuthKind | undefined {
  if (WEBHOOK_PATH.test(url)) return "webhook";
  if (ADMIN_PATH.test(url)) return "admin";
  return undefined;
}

/** A route's path segment as a reader of its value in a request: a `:param` of the route, or the literal segment. */
function segment(seg: string | undefined): ((req: FastifyRequest) => string) | undefined {
  if (seg === undefined) return undefined;
  if (!seg.startsWith(":")) return () => seg;
  const name = seg.slice(1);
  return (req) => String((req.params as Record<string, unknown>)[name] ?? "");
}

/**
 * X-API-Key and the source-IP allowlist; for routes under the webhook path also the version
 * and site. A callback hook, not an async one: a keep-alive connection that showed this key
 * before is answered without a promise (the partner's every request after its first).
 */
export function webhookGuard(ctx: ApiContext, routeUrl: string): onRequestHookHandler<Server> {
  const [, versionSeg, siteSeg] = WEBHOOK_PATH.exec(routeUrl) ?? [];
  const versionOf = segment(versionSeg);
  const siteOf = segment(siteSeg);
  const place = (req: FastifyRequest): Error | undefined => {
    if (versionOf === undefined || siteOf === undefined) return undefined;
    const version = versionOf(req);
    if (version !== ctx.config.api_version) return notFound(`API version "${version}" is not served here (use ${ctx.config.api_version})`);
    const siteId = siteOf(req);
    if (siteId !== ctx.config.site_id) return notFound(`site "${siteId}" is not this gateway's`);
    return undefined;
  };
  const verdict = (req: FastifyRequest, check: KeyCheck): Error | undefined => {
    if (check.result === "wait")
      return rateLimited(`too many wrong API keys from ${req.ip}; retry in ${check.retryAfterS} s`, {
        "retry-after": String(check.retryAfterS),
      });
    if (check.result === "wrong") return unauthorized("X-API-Key is not valid");
    return place(req);
  };
  return (req, _reply, done) => {
    const next = done as (err?: Error) => void;
    if (!ctx.credentials.ipAllowed(req.ip)) return next(forbidden(`source address ${req.ip} is not on the allowlist`));
    const key = req.headers["x-api-key"];
    if (typeof key !== "string" || key.length === 0) return next(unauthorized("X-API-Key header is missing"));
    if (ctx.credentials.shownOn(req.raw.socket, key)) return next(place(req));
    ctx.credentials.checkApiKeyOn(req.raw.socket, key, sourceKey(req.ip)).then(
      (check) => next(verdict(req, check)),
      (e: unknown) =>
        next(
          e instanceof HashBusyError
            ? rateLimited("the gateway is busy checking keys; retry in 1 s", { "retry-after": "1" })
            : (e as Error),
        ),
    );
  };
}

/** A bearer token from POST /connect/token, then this gateway's organizationId and moleculeId. */
export function adminGuard(ctx: ApiContext): Guard {
  return async (req) => {
    if (!ctx.credentials.adminIpAllowed(req.ip))
      throw forbidden(`source address ${req.ip} is not on the admin allowlist (auth.admin_allowlist)`);
    const token = bearerToken(req.headers.authorization);
    if (!token) throw unauthorized("a Bearer token is required (POST /connect/token)", { "www-authenticate": 'Bearer realm="sitegate"' });
    const state = ctx.tokens.check(token);
    if (state === "revoked")
      throw unauthorized("the token was revoked (its user left the config, changed password, or `sitegate token revoke` ran)", {
        "www-authenticate": 'Bearer realm="sitegate", error="invalid_token", error_description="the token was revoked"',
      });
    if (state === "expired")
      throw unauthorized("the token has expired", {
        "www-authenticate": 'Bearer realm="sitegate", error="invalid_token", error_description="the token has expired"',
      });
    if (state !== "ok")
      throw unauthorized("the token is not valid", { "www-authenticate": 'Bearer realm="sitegate", error="invalid_token"' });
    const q = configureQuery.safeParse(req.query ?? {});
    if (!q.success) throw badRequest("organizationId and moleculeId are required", issuesToDetails(q.error.issues));
    if (q.data.organizationId !== ctx.config.organization_id)
      throw forbidden(`organization "${q.data.organizationId}" is not this gateway's`);
    if (q.data.moleculeId !== ctx.config.site_id) throw notFound(`site "${q.data.moleculeId}" is not this gateway's`);
  };
}

/**
 * Gives every route registered after this call the guard its `config.auth` names, and
 * guards unknown paths under the webhook prefix.
 */
export function installGuards(app: FastifyInstance<Server>, ctx: ApiContext): void {
  const admin = adminGuard(ctx);
  app.addHook("onRoute", (route) => {
    const auth = route.config?.auth;
    const required = requiredAuth(route.url ?? "");
    if (required && auth !== required) {
      throw new SitegateError(
        "INTERNAL",
        `${String(route.method)} ${route.url} must declare config: { auth: "${required}" } (see src/api/guard.ts)`,
      );
    }
    if (!auth) return;
    const guard = auth === "admin" ? admin : webhookGuard(ctx, route.url ?? "");
    const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    route.onRequest = [...own, guard];
  });
  // The webhook prefix is the partner's space as a whole: a path under it that no route
  // serves is authenticated like one (401/403 before its body is read, then 404).
  app.all("/:version/api/gateway/:site/*", { config: { auth: "webhook" } }, async (req) => {
    throw notFound(`no route ${req.method} ${req.url.split("?")[0]}`);
  });
}
