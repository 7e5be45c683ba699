// The local status page as a fastify plugin under /ui/: a login with
// auth.users (the token endpoint's scrypt check and its per-username lock), an HttpOnly;
// Secure; SameSite=Strict session cookie, a CSRF token on every state-changing request,
// failed logins throttled per source (IPv6 per /64) with a global budget, each attempt
// counted before its password is checked, the ui.allow address list, and security
// headers on every answer. Failed logins are logged with the source address only.
// Pages are one static shell + app.js (no inline script or style: the CSP forbids them);
// the data comes from the JSON under /ui/api/.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BlockList } from "node:net";
import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { Credentials, addCidr, ipInList } from "../api/auth.js";
import { VERSION } from "../version.js";
import { SitegateError } from "../errors.js";
import { asSitegateError, errorAnswer, statusOf } from "../services/errors.js";
import { LoginThrottle, Sessions, parseCookies, sameToken, type Session } from "./session.js";
import { BusView, UplinkView, devices, events, overview, type UiDeps } from "./views.js";
import { Jobs } from "./jobs.js";

export const UI_PREFIX = "/ui";
const SESSION_COOKIE = "sg_session";
const LOGIN_COOKIE = "sg_login";
const PAGES = ["", "devices", "buses", "events", "uplink", "commissioning"];
const COOKIE_ATTRS = `Path=${UI_PREFIX}; HttpOnly; Secure; SameSite=Strict`;

export const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=()",
  "strict-transport-security": "max-age=31536000",
  "cache-control": "no-store",
};

/** Assets live in src/ui/static (served from the source tree; tsc copies no non-TS files). */
export function staticDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const d of [join(here, "../../../src/ui/static"), join(here, "static")]) if (existsSync(join(d, "app.js"))) return d;
  throw new SitegateError("INTERNAL", `status page assets not found next to ${here}`);
}

/**
 * Every `{{name}}` of a page replaced (each as often as it appears; the values are used as
 * they are, never as replacement patterns). A placeholder without a value is a bug in the
 * page: it throws rather than show the braces.
 */
export function fillTemplate(tpl: string, values: Record<string, string>): string {
  return tpl.replace(/\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g, (_m, name: string) => {
    const v = values[name];
    if (v === undefined) throw new SitegateError("INTERNAL", `status page template: no value for {{${name}}}`);
    return v;
  });
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

declare module "fastify" {
  interface FastifyRequest {
    uiSession?: Session;
  }
}

/** Registers one group of the page's routes or hooks on the /ui/ scope. */
type Routes = (app: FastifyInstance) => void;

export interface UiPlugin {
  plugin: FastifyPluginAsync;
  jobs: Jobs;
}

/** Reads the assets and builds the page's state once; `plugin` mounts it under /ui/. */
export function uiPlugin(deps: UiDeps): UiPlugin {
  const dir = staticDir();
  const pages = pageRoutes(dir);
  const sessions = new Sessions(deps.config.ui.session_ttl_s * 1000);
  const login = loginRoutes(deps, sessions, readFileSync(join(dir, "login.html")).toString("utf8"));
  const guards = guardHooks(deps.config.ui.allow, sessions);
  const api = apiRoutes(deps);
  const jobs = new Jobs(deps.commissioning, deps.log.child({ part: "ui" }));
  const commission = commissionRoutes(jobs);
  const inner: FastifyPluginAsync = async (app: FastifyInstance) => {
    guards(app);
    pages(app);
    login(app);
    api(app);
    commission(app);
  };
  return {
    jobs,
    plugin: async (app) => {
      // The listener's root leads to the page: someone who types the gateway's address lands on it.
      // Only `/`: every other path keeps its own answer (the API's JSON 404 included).
      app.get("/", async (_req, reply) => reply.code(302).header("location", `${UI_PREFIX}/`).send());
      await app.register(inner, { prefix: UI_PREFIX });
    },
  };
}

/** A page asked for without a session redirects to the login. */
async function needPage(req: FastifyRequest, reply: FastifyReply) {
  if (!req.uiSession) return reply.code(303).header("location", `${UI_PREFIX}/login`).send();
}

/** JSON without a session is a 401; a call that changes something also needs the session's CSRF token. */
async function needApi(req: FastifyRequest, reply: FastifyReply) {
  if (!req.uiSession) return sendError(reply, new SitegateError("UNAUTHORIZED", "log in first"));
  if (req.method !== "GET" && !sameToken(req.headers["x-csrf-token"], req.uiSession.csrf)) {
    return sendError(reply, new SitegateError("FORBIDDEN", "missing or wrong CSRF token; reload the page"));
  }
}

/** The page's JSON error answer: {error, message} with the status of the one table (services/errors.ts). */
function sendError(reply: FastifyReply, e: SitegateError) {
  const a = errorAnswer(e);
  return reply.code(a.status).send({ error: a.code, message: a.message });
}

/** What every request under /ui/ passes through: form bodies, ui.allow, the session, security headers, errors. */
function guardHooks(allowList: string[], sessions: Sessions): Routes {
  const allow = new BlockList();
  for (const c of allowList) addCidr(allow, c);
  return (app) => {
    if (!app.hasContentTypeParser("application/x-www-form-urlencoded")) {
      app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) => {
        done(null, Object.fromEntries(new URLSearchParams(body as string)));
      });
    }
    app.addHook("onRequest", async (req, reply) => {
      if (!ipInList(allow, req.ip))
        return reply
          .code(statusOf("FORBIDDEN"))
          .type("text/plain; charset=utf-8")
          .send(`source address ${req.ip} may not open the status page (ui.allow)\n`);
      req.uiSession = sessions.get(parseCookies(req.headers.cookie)[SESSION_COOKIE]);
    });
    app.addHook("onSend", async (_req, reply, payload) => {
      reply.headers(SECURITY_HEADERS);
      return payload;
    });
    app.setErrorHandler((err, req, reply) => {
      const error = asSitegateError(err);
      if (errorAnswer(error).status === 500) req.log.error({ err, reqId: req.id }, "status page request failed");
      return sendError(reply, error);
    });
    app.setNotFoundHandler({ preHandler: needPage }, (req, reply) => {
      reply
        .code(statusOf("NOT_FOUND"))
        .type("text/plain; charset=utf-8")
        .send(`no page ${req.url.split("?")[0]}\n`);
    });
  };
}

/** The page shell under every page name, and its script and stylesheet. */
function pageRoutes(dir: string): Routes {
  const asset = (f: string) => readFileSync(join(dir, f));
  const assets: Record<"app.js" | "app.css", { body: Buffer; type: string }> = {
    "app.js": { body: asset("app.js"), type: "text/javascript; charset=utf-8" },
    "app.css": { body: asset("app.css"), type: "text/css; charset=utf-8" },
  };
  const shell = asset("app.html");
  return (app) => {
    for (const p of PAGES)
      app.get(`/${p}`, { preHandler: needPage }, async (_req, reply) => reply.type("text/html; charset=utf-8").send(shell));
    // The stylesheet is the only asset served without a session (the login page uses it).
    app.get("/assets/app.css", async (_req, reply) => reply.type(assets["app.css"].type).send(assets["app.css"].body));
    app.get("/assets/app.js", { preHandler: needPage }, async (_req, reply) =>
      reply.type(assets["app.js"].type).send(assets["app.js"].body),
    );
  };
}

/** The login form (CSRF cookie, throttle, auth.users) and logout. */
function loginRoutes(deps: UiDeps, sessions: Sessions, loginTpl: string): Routes {
  const credentials = new Credentials(deps.config);
  const throttle = new LoginThrottle();
  const loginPage = (reply: FastifyReply, status: number, message: string) => {
    const token = randomBytes(24).toString("base64url");
    reply
      .code(status)
      .header("set-cookie", `${LOGIN_COOKIE}=${token}; ${COOKIE_ATTRS}; Max-Age=900`)
      .type("text/html; charset=utf-8")
      .send(
        fillTemplate(loginTpl, {
          csrf: token,
          site: esc(deps.config.site_id),
          message: message ? `<p class="error" id="login-error" role="alert">${esc(message)}</p>` : "",
        }),
      );
  };
  const tooMany = (reply: FastifyReply, wait: number, message: string) => {
    reply.header("retry-after", String(wait));
    return loginPage(reply, 429, message);
  };
  const sourceWait = (ip: string, wait: number) =>
    `Too many failed logins ${throttle.globalExhausted() ? "on this gateway" : `from ${ip}`}; try again in ${Math.ceil(wait / 60)} min.`;
  const logIn = async (req: FastifyRequest, reply: FastifyReply) => {
    const wait = throttle.retryAfterS(req.ip);
    if (wait > 0) return tooMany(reply, wait, sourceWait(req.ip, wait));
    const body = (req.body ?? {}) as Record<string, unknown>;
    const pre = parseCookies(req.headers.cookie)[LOGIN_COOKIE];
    if (!pre || !sameToken(body.csrf, pre)) return loginPage(reply, 403, "The login form expired; please try again.");
    const user = typeof body.username === "string" ? body.username : "";
    const password = typeof body.password === "string" ? body.password : "";
    let ok = false;
    if (user && password) {
      const a = await deps.guesses.attempt({ throttle, key: req.ip, front: "page" }, user, () => credentials.checkPassword(user, password));
      if (a.result === "busy") return tooMany(reply, 1, "The gateway is busy; try again in a moment.");
      if (a.result === "wait" && a.who === "source") return tooMany(reply, a.retryAfterS, sourceWait(req.ip, a.retryAfterS));
      if (a.result === "wait")
        return tooMany(reply, a.retryAfterS, `Too many failed logins for this username; try again in ${a.retryAfterS} s.`);
      ok = a.result === "ok";
    } else throttle.fail(req.ip); // an empty field is a failed login too, with nothing to check
    if (!ok) {
      // Never the typed username: it is often a password typed in the wrong field.
      deps.log.warn({ ip: req.ip }, "status page login refused");
      return loginPage(reply, 401, "Wrong username or password.");
    }
    throttle.succeed(req.ip);
    const { id } = sessions.create(user);
    deps.log.info({ ip: req.ip, user }, "status page login");
    return reply
      .code(303)
      .header("set-cookie", [
        `${SESSION_COOKIE}=${id}; ${COOKIE_ATTRS}; Max-Age=${deps.config.ui.session_ttl_s}`,
        `${LOGIN_COOKIE}=; ${COOKIE_ATTRS}; Max-Age=0`,
      ])
      .header("location", `${UI_PREFIX}/`)
      .send();
  };
  return (app) => {
    app.get("/login", async (req, reply) => {
      if (req.uiSession) return reply.code(303).header("location", `${UI_PREFIX}/`).send();
      return loginPage(reply, 200, "");
    });
    app.post("/login", logIn);
    app.post("/logout", async (req, reply) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (req.uiSession && sameToken(body.csrf, req.uiSession.csrf)) sessions.destroy(parseCookies(req.headers.cookie)[SESSION_COOKIE]);
      else if (req.uiSession)
        return reply.code(statusOf("FORBIDDEN")).type("text/plain; charset=utf-8").send("missing or wrong CSRF token\n");
      return reply
        .code(303)
        .header("set-cookie", `${SESSION_COOKIE}=; ${COOKIE_ATTRS}; Max-Age=0`)
        .header("location", `${UI_PREFIX}/login`)
        .send();
    });
  };
}

/** The JSON the pages read, under /ui/api/. */
function apiRoutes(deps: UiDeps): Routes {
  const busView = new BusView(deps);
  const uplinkView = new UplinkView(deps);
  return (app) => {
    busView.start();
    app.addHook("onClose", async () => busView.stop());
    app.get("/api/session", { preHandler: needApi }, async (req) => ({
      user: req.uiSession!.user,
      csrf: req.uiSession!.csrf,
      site_id: deps.config.site_id,
      version: VERSION,
      profiles: deps.profiles.names(),
    }));
    app.get("/api/overview", { preHandler: needApi, config: { rateLimit: false } }, async () => overview(deps));
    app.get("/api/devices", { preHandler: needApi, config: { rateLimit: false } }, async () => ({ devices: devices(deps) }));
    app.get("/api/history", { preHandler: needApi }, async (req) => {
      const q = req.query as { device?: string; metric?: string };
      if (!q.device || !q.metric) throw new SitegateError("INVALID_REQUEST", "device and metric are required");
      return { device: q.device, metric: q.metric, step_s: 60, points: deps.history.points(q.device, q.metric) };
    });
    app.get("/api/buses", { preHandler: needApi, config: { rateLimit: false } }, async () => ({ buses: busView.list() }));
    app.get("/api/events", { preHandler: needApi }, async () => ({ events: events(deps) }));
    app.get("/api/uplink", { preHandler: needApi }, async () => uplinkView.get());
  };
}

/** The commissioning job (scan, read) the page starts and polls. */
function commissionRoutes(jobs: Jobs): Routes {
  const start = (run: (body: Record<string, unknown>) => unknown) => async (req: FastifyRequest, reply: FastifyReply) => {
    // Bad input (INVALID_REQUEST) and a job already running (BUSY) answer through the error handler.
    return reply.code(202).send({ job: run((req.body ?? {}) as Record<string, unknown>) });
  };
  return (app) => {
    app.get("/api/commission", { preHandler: needApi, config: { rateLimit: false } }, async () => ({ job: jobs.get() }));
    app.post(
      "/api/commission/scan",
      { preHandler: needApi },
      start((body) => jobs.scan(body)),
    );
    app.post(
      "/api/commission/read",
      { preHandler: needApi },
      start((body) => jobs.read(body)),
    );
  };
}
