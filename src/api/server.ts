// The HTTPS API as a lifecycle part: fastify with the TLS files of the config, the
// connection limits (connection-limits.ts), a 256 KiB body limit, JSON and form bodies only, a per-source rate limit, one error body for
// every failure, authentication before any body is read (guard.ts), and the feature
// routes (token, gateway, admin, ops) as plugins.
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import rateLimit from "@fastify/rate-limit";
import type { Part } from "../lifecycle.js";
import { SitegateError } from "../errors.js";
import { asSitegateError, errorAnswer } from "../services/errors.js";
import { HttpError, errorBody, notFound, rateLimited } from "./errors.js";
import { splitHostPort, urlHost } from "../util/process.js";
import { Credentials, TokenStore, onAnyList } from "./auth.js";
import { installGuards } from "./guard.js";
import { tokenRoutes } from "./token.js";
import { gatewayRoutes } from "./gateway.js";
import { adminRoutes } from "./admin.js";
import { opsRoutes } from "./ops.js";
import { drRoutes } from "./dr.js";
import type { ApiContext, ApiDeps } from "./context.js";
import { RATE_LIMIT_HEADERS, httpsOptions } from "./fastify-options.js";
import { connectionLimits } from "./connection-limits.js";
import { ConnectionGate } from "./connection-gate.js";
import type { GuessLimits } from "./guess-limit.js";
import type { MetricFamily } from "../metrics.js";

export const BODY_LIMIT = 256 * 1024;

export function isTokenRoute(req: FastifyRequest): boolean {
  return req.url.split("?")[0] === "/connect/token";
}

export async function buildApp(ctx: ApiContext, gate: ConnectionGate): Promise<FastifyInstance<import("node:https").Server>> {
  const { config } = ctx;
  const app = Fastify(httpsOptions(config.http.tls, ctx.log, BODY_LIMIT, connectionLimits(ctx.connectionLimits)));
  gate.install(app.server);
  app.removeContentTypeParser("text/plain");
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
  await app.register(rateLimit, {
    max: config.http.rate_limit_per_min,
    timeWindow: 60_000,
    ...RATE_LIMIT_HEADERS,
    errorResponseBuilder: (_req, c) =>
      rateLimited(`rate limit of ${c.max} requests per minute exceeded; retry in ${Math.ceil(c.ttl / 1000)} s`),
  });

  // After the rate limit (its onRoute hook runs first), before every route.
  installGuards(app, ctx);

  app.setErrorHandler((err, req, reply) => {
    const error = asSitegateError(framework(err, req));
    const a = errorAnswer(error);
    if (a.status === 500) req.log.error({ err, reqId: req.id }, "request failed");
    reply.code(a.status).headers(error instanceof HttpError ? error.headers : {});
    if (isTokenRoute(req) && a.status !== 429 && a.status < 500) {
      return reply.send({ error: "invalid_request", error_description: a.message });
    }
    return reply.send(errorBody(a));
  });
  // An unknown path counts against the source's rate limit like a route (the plugin's own
  // hook sees only registered routes).
  app.setNotFoundHandler({ preHandler: app.rateLimit() }, (req, reply) => {
    const a = errorAnswer(notFound(`no route ${req.method} ${req.url.split("?")[0]}`));
    reply.code(a.status).send(errorBody(a));
  });

  await app.register(tokenRoutes(ctx));
  await app.register(gatewayRoutes(ctx));
  await app.register(drRoutes(ctx));
  await app.register(adminRoutes(ctx));
  await app.register(opsRoutes(ctx));
  for (const p of ctx.plugins?.() ?? []) await app.register(p);
  return app;
}

/** fastify's body refusals, with messages that name our limits. */
function framework(err: unknown, req: FastifyRequest): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "FST_ERR_CTP_BODY_TOO_LARGE") return new SitegateError("PAYLOAD_TOO_LARGE", `the body is over ${BODY_LIMIT / 1024} KiB`);
  if (code === "FST_ERR_CTP_INVALID_MEDIA_TYPE")
    return new SitegateError("UNSUPPORTED_MEDIA_TYPE", `content type ${req.headers["content-type"] ?? "(none)"} is not accepted here`);
  return err;
}

export class ApiServer implements Part {
  readonly name = "api";
  private app: FastifyInstance<import("node:https").Server> | null = null;
  private readonly gate: ConnectionGate;
  private readonly guesses: GuessLimits;
  port = 0;

  constructor(private readonly deps: ApiDeps) {
    const { auth, http, ui } = deps.config;
    // Who the listener serves at all: the partner, the admin, the probes, and the status page when it rides here.
    const lists = [auth.ip_allowlist, auth.admin_allowlist, http.metrics_allow, ...(ui.enabled && !ui.listen ? [ui.allow] : [])];
    this.gate = new ConnectionGate(connectionLimits(deps.connectionLimits), deps.log, "api", onAnyList(lists));
    this.guesses = deps.guesses;
  }

  async start(): Promise<void> {
    const db = this.deps.storage.db;
    const credentials = new Credentials(this.deps.config);
    const ctx: ApiContext = {
      ...this.deps,
      credentials,
      tokens: new TokenStore(db, this.deps.config.auth.token_ttl_s, this.deps.now, (user) => credentials.fingerprint(user)),
      guesses: this.guesses,
    };
    const app = await buildApp(ctx, this.gate);
    const { host, port } = splitHostPort(this.deps.config.http.listen);
    await app.listen({ host, port });
    const addr = app.server.address();
    this.port = typeof addr === "object" && addr ? addr.port : port;
    this.app = app;
    this.deps.log.info({ url: this.url }, "api listening");
  }

  get url(): string {
    return `https://${urlHost(splitHostPort(this.deps.config.http.listen).host)}:${this.port}`;
  }

  async stop(): Promise<void> {
    await this.app?.close();
    this.app = null;
  }

  metrics(): MetricFamily[] {
    return [...this.gate.metrics(), ...this.guesses.metrics()];
  }
}
