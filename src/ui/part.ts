// The status page as a lifecycle part. Without ui.listen its routes ride on the API
// listener (ApiServer registers `apiPlugins()`); with ui.listen it runs a second HTTPS
// listener of its own with the same TLS files, connection limits and per-source rate limit. Either
// way the history of the 24 h charts is fed from the poller's snapshots (observe()).
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from "fastify";
import rateLimit from "@fastify/rate-limit";
import { RATE_LIMIT_HEADERS, httpsOptions } from "../api/fastify-options.js";
import { connectionLimits } from "../api/connection-limits.js";
import { ConnectionGate } from "../api/connection-gate.js";
import { onAnyList } from "../api/auth.js";
import type { MetricFamily } from "../metrics.js";
import { SitegateError } from "../errors.js";
import { asSitegateError, errorAnswer } from "../services/errors.js";
import type { Part } from "../lifecycle.js";
import type { Snapshot } from "../telemetry/types.js";
import { splitHostPort, urlHost } from "../util/process.js";
import { MinuteHistory } from "./history.js";
import { uiPlugin, type UiPlugin } from "./plugin.js";
import type { UiDeps } from "./views.js";

export class UiPart implements Part {
  readonly name = "ui";
  readonly history = new MinuteHistory();
  private ui: UiPlugin | null = null;
  private app: FastifyInstance<import("node:https").Server> | null = null;
  private readonly gate: ConnectionGate;
  port = 0;

  constructor(private readonly deps: Omit<UiDeps, "history">) {
    // Its own listener serves the status page only: ui.allow.
    this.gate = new ConnectionGate(connectionLimits(deps.connectionLimits), deps.log, "ui", onAnyList([deps.config.ui.allow]));
  }

  get enabled(): boolean {
    return this.deps.config.ui.enabled;
  }

  /** Fed with every poll snapshot (cheap: a few float adds per metric). */
  observe(s: Snapshot): void {
    if (this.enabled) this.history.observe(s);
  }

  private plugin(): UiPlugin {
    this.ui ??= uiPlugin({ ...this.deps, history: this.history });
    return this.ui;
  }

  /** Plugins for the API listener: the UI routes when the UI shares it. */
  apiPlugins(): FastifyPluginAsync[] {
    if (!this.enabled || this.deps.config.ui.listen) return [];
    return [this.plugin().plugin];
  }

  async start(): Promise<void> {
    const { config } = this.deps;
    if (!config.ui.enabled || !config.ui.listen) return;
    const app = Fastify(httpsOptions(config.http.tls, this.deps.log, 64 * 1024, connectionLimits(this.deps.connectionLimits)));
    this.gate.install(app.server);
    app.removeContentTypeParser("text/plain");
    // The same per-source limit as the API listener the page otherwise rides on.
    await app.register(rateLimit, {
      max: config.http.rate_limit_per_min,
      timeWindow: 60_000,
      ...RATE_LIMIT_HEADERS,
      errorResponseBuilder: (_req, c) =>
        new SitegateError("RATE_LIMITED", `rate limit of ${c.max} requests per minute exceeded; retry in ${Math.ceil(c.ttl / 1000)} s`),
    });
    await app.register(this.plugin().plugin);
    // An unknown path counts against the rate limit too; the limit's 429 outside the page's
    // routes (which answer their own errors) is answered here.
    app.setErrorHandler((err, req, reply) => {
      const a = errorAnswer(asSitegateError(err));
      if (a.status === 500) req.log.error({ err, reqId: req.id }, "status page request failed");
      return reply.code(a.status).send({ error: a.code, message: a.message });
    });
    app.setNotFoundHandler({ preHandler: app.rateLimit() }, (_req, reply) => reply.code(303).header("location", "/ui/").send());
    const { host, port } = splitHostPort(config.ui.listen);
    this.app = app; // before listen: after a failed start, stop() closes it
    await app.listen({ host, port });
    const addr = app.server.address();
    this.port = typeof addr === "object" && addr ? addr.port : port;
    this.deps.log.info({ url: `${this.url}/ui/` }, "status page listening");
  }

  get url(): string {
    return `https://${urlHost(splitHostPort(this.deps.config.ui.listen ?? "127.0.0.1:0").host)}:${this.port}`;
  }

  async stop(): Promise<void> {
    await this.ui?.jobs.stop();
    await this.app?.close();
    this.app = null;
    // Its stopped jobs stay aborted: a start retried after a failure builds the page anew.
    if (this.deps.config.ui.listen) this.ui = null;
  }

  /** The connection figures of the page's own listener (on the API listener, the API reports them). */
  metrics(): MetricFamily[] {
    return this.enabled && this.deps.config.ui.listen ? this.gate.metrics() : [];
  }
}
