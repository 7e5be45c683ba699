// POST /connect/token: the OAuth 2.0 resource owner password grant (spec 4.1, RFC 6749
// 4.3), answered per RFC 6749 5.1 / 5.2, with the client_id in the form or by HTTP Basic
// with an empty secret; the source throttle and the endpoint's own username lock
// (guess-limit.ts; the status page locks a username apart) around the password check.
// The order of the checks, and why: docs/security.md (the table, and "Guessing at
// /connect/token").
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { ApiContext } from "./context.js";
import { SitegateError } from "../errors.js";
import { forbidden, rateLimited } from "./errors.js";
import { tokenForm } from "./schemas.js";
import { FailureThrottle, sourceKey } from "./throttle.js";
import type { GuessLimits } from "./guess-limit.js";
import { isSpace, isWordChar, splitAuthorization } from "./headers.js";

type OAuthError = "invalid_request" | "invalid_client" | "invalid_grant" | "unsupported_grant_type";

/** Failed attempts per source address per minute; the next one is 429. */
export const TOKEN_IP_FAILURES = 10;
/** Longest Authorization header looked at: a Basic client_id is short. */
export const MAX_AUTHORIZATION = 1024;

function oauthError(reply: FastifyReply, error: OAuthError, description: string): FastifyReply {
  return reply
    .code(error === "invalid_client" ? 401 : 400)
    .headers({ "cache-control": "no-store", ...(error === "invalid_client" ? { "www-authenticate": 'Basic realm="sitegate"' } : {}) })
    .send({ error, error_description: description });
}

const tooMany = (s: number, why: string) =>
  rateLimited(`${why}; retry in ${s} s`, { "retry-after": String(s), "cache-control": "no-store" });

/** Form-urlencoding, as RFC 6749 2.3.1 has the Basic user and password encoded. */
const B64 = /^[A-Za-z0-9+/]*={0,2}$/; // linear: one character class, then a tail it cannot overlap

function formDecode(s: string): string {
  return decodeURIComponent(s.replaceAll("+", " "));
}

/**
 * The client_id of `Authorization: Basic base64(client_id:client_secret)`: null when the
 * request carries no Basic credentials, else the id, or why the credentials are refused
 * (the token endpoint answers that with invalid_client, 401).
 */
export function basicClientId(header: unknown): { id: string } | { refused: string } | null {
  if (typeof header !== "string") return null;
  if (header.length > MAX_AUTHORIZATION) {
    return header.slice(0, 6).toLowerCase().startsWith("basic")
      ? { refused: `the Authorization header is over ${MAX_AUTHORIZATION} characters` }
      : null;
  }
  const { scheme, rest } = splitAuthorization(header);
  if (scheme.toLowerCase() !== "basic") {
    // "Basic%%%" is malformed Basic; "Basicx" or another scheme is not Basic at all.
    const glued = header.length > 5 && header.slice(0, 5).toLowerCase() === "basic" && !isWordChar(header.charCodeAt(5));
    return glued ? { refused: "malformed Basic credentials" } : null;
  }
  for (let i = 0; i < rest.length; i++) if (isSpace(rest.charCodeAt(i))) return { refused: "malformed Basic credentials" };
  if (rest.length === 0 || rest.length % 4 !== 0 || !B64.test(rest)) return { refused: "malformed Basic credentials (not base64)" };
  const text = Buffer.from(rest, "base64").toString("utf8");
  const colon = text.indexOf(":");
  if (colon < 0) return { refused: "malformed Basic credentials (no colon between client_id and client_secret)" };
  let id: string, secret: string;
  try {
    id = formDecode(text.slice(0, colon));
    secret = formDecode(text.slice(colon + 1));
  } catch {
    return { refused: "malformed Basic credentials (bad percent-encoding)" };
  }
  if (id.length === 0) return { refused: "the Basic credentials carry no client_id" };
  if (secret.length > 0) return { refused: "this client has no secret; send an empty client_secret" };
  return { id };
}

/** The token endpoint's failures per source address (the username lock is GuessLimits', the token endpoint's own). */
export class TokenLimiter {
  readonly sources: FailureThrottle;

  constructor(now: () => number = Date.now) {
    this.sources = new FailureThrottle({ max: TOKEN_IP_FAILURES, windowMs: 60_000, capacity: 4096, now });
  }

  failed(ip: string): void {
    this.sources.fail(sourceKey(ip));
  }
}

/** The password check of a well-formed request, within the source and username limits. */
async function checkGrant(guesses: GuessLimits, sources: FailureThrottle, ip: string, username: string, check: () => Promise<boolean>) {
  const a = await guesses.attempt({ throttle: sources, key: sourceKey(ip), front: "token" }, username, check);
  if (a.result === "wait")
    throw tooMany(
      a.retryAfterS,
      a.who === "source" ? `too many failed token requests from ${ip}` : "too many failed logins for this username",
    );
  if (a.result === "busy") throw tooMany(1, "the gateway is busy checking passwords");
  return a.result === "ok";
}

export function tokenRoutes(ctx: ApiContext): FastifyPluginAsync {
  const limiter = new TokenLimiter(ctx.now);
  const gate = async (req: FastifyRequest) => {
    if (!ctx.credentials.adminIpAllowed(req.ip))
      throw forbidden(`source address ${req.ip} is not on the admin allowlist (auth.admin_allowlist)`);
    const wait = limiter.sources.retryAfterS(sourceKey(req.ip));
    if (wait > 0) throw tooMany(wait, `too many failed token requests from ${req.ip}`);
  };
  return async (app) => {
    app.post("/connect/token", { onRequest: gate }, async (req, reply) => {
      const type = (String(req.headers["content-type"] ?? "").split(";")[0] ?? "").trim().toLowerCase();
      // Answered by the error handler in the OAuth shape ({error: invalid_request, error_description}).
      if (type !== "application/x-www-form-urlencoded")
        throw new SitegateError("UNSUPPORTED_MEDIA_TYPE", "the token request must be application/x-www-form-urlencoded");
      const basic = basicClientId(req.headers.authorization);
      if (basic && "refused" in basic) {
        limiter.failed(req.ip);
        return oauthError(reply, "invalid_client", basic.refused);
      }
      const raw = (req.body ?? {}) as Record<string, unknown>;
      // RFC 6749 5.2: a grant type this server does not support is that error, whatever else is missing.
      if (typeof raw.grant_type === "string" && raw.grant_type !== "password") {
        return oauthError(reply, "unsupported_grant_type", `grant_type "${raw.grant_type.slice(0, 64)}" is not supported; use "password"`);
      }
      const form = tokenForm.safeParse(raw);
      const missing = form.success ? [] : form.error.issues.map((i) => String(i.path[0]));
      if (!basic && raw.client_id === undefined) missing.push("client_id");
      if (!form.success || missing.length) return oauthError(reply, "invalid_request", `missing form field(s): ${missing.join(", ")}`);
      const f = form.data;
      if (basic && f.client_id !== undefined && f.client_id !== basic.id) {
        limiter.failed(req.ip);
        return oauthError(reply, "invalid_client", "client_id in the form and in the Basic credentials differ");
      }
      if (!ctx.credentials.clientIdMatches(basic?.id ?? f.client_id ?? "")) {
        limiter.failed(req.ip);
        return oauthError(reply, "invalid_client", "unknown client_id");
      }
      const ok = await checkGrant(ctx.guesses, limiter.sources, req.ip, f.username, () =>
        ctx.credentials.checkPassword(f.username, f.password),
      );
      if (!ok) return oauthError(reply, "invalid_grant", "wrong username or password");
      const issued = ctx.tokens.issue(f.username);
      return reply
        .headers({ "cache-control": "no-store", pragma: "no-cache" })
        .send({ access_token: issued.token, expires_in: issued.expiresIn, token_type: "Bearer" });
    });
  };
}
