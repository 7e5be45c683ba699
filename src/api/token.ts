// POST /connect/token: the OAuth 2.0 resource owner password grant (spec 4.1, RFC 6749
// section 4.3), answered per RFC 6749 5.1 / 5.2. The client identifies itself by the form's
// client_id, or by HTTP Basic (RFC 6749 2.3.1) with an empty secret: the partner client is
// public, it has no secret.
import type { FastifyPluginAsync, FastifyReply } from "fastify";
import { isStorageUnavailable } from "../storage/db.js";
import type { ApiContext } from "./context.js";
import { HttpError } from "./errors.js";
import { tokenForm } from "./schemas.js";

type OAuthError = "invalid_request" | "invalid_client" | "invalid_grant" | "unsupported_grant_type";

function oauthError(reply: FastifyReply, error: OAuthError, description: string): FastifyReply {
  return reply
    .code(error === "invalid_client" ? 401 : 400)
    .headers({ "cache-control": "no-store", ...(error === "invalid_client" ? { "www-authenticate": 'Basic realm="sitegate"' } : {}) })
    .send({ error, error_description: description });
}

/** Form-urlencoding, as RFC 6749 2.3.1 has the Basic user and password encoded. */
function formDecode(s: string): string {
  return decodeURIComponent(s.replace(/\+/g, " "));
}

/**
 * The client_id of `Authorization: Basic base64(client_id:client_secret)`: null when the
 * request carries no Basic credentials, else the id, or why the credentials are refused
 * (the token endpoint answers that with invalid_client, 401).
 */
export function basicClientId(header: unknown): { id: string } | { refused: string } | null {
  if (typeof header !== "string") return null;
  const m = /^Basic(?:\s+(\S*))?\s*$/i.exec(header);
  if (!m) return /^Basic\b/i.test(header) ? { refused: "malformed Basic credentials" } : null;
  const b64 = m[1] ?? "";
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return { refused: "malformed Basic credentials (not base64)" };
  const text = Buffer.from(b64, "base64").toString("utf8");
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

export function tokenRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.post("/connect/token", async (req, reply) => {
      const type = String(req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
      if (type !== "application/x-www-form-urlencoded") {
        return reply.code(415).send({ error: "invalid_request", error_description: "the token request must be application/x-www-form-urlencoded" });
      }
      const basic = basicClientId(req.headers.authorization);
      if (basic && "refused" in basic) return oauthError(reply, "invalid_client", basic.refused);
      const raw = (req.body ?? {}) as Record<string, unknown>;
      const form = tokenForm.safeParse(raw);
      const missing = form.success ? [] : form.error.issues.map((i) => String(i.path[0]));
      if (!basic && raw.client_id === undefined) missing.push("client_id");
      if (!form.success || missing.length) return oauthError(reply, "invalid_request", `missing form field(s): ${missing.join(", ")}`);
      const f = form.data;
      if (f.grant_type !== "password") return oauthError(reply, "unsupported_grant_type", `grant_type "${f.grant_type}" is not supported; use "password"`);
      if (basic && f.client_id !== undefined && f.client_id !== basic.id) return oauthError(reply, "invalid_client", "client_id in the form and in the Basic credentials differ");
      if (!ctx.credentials.clientIdMatches(basic?.id ?? f.client_id ?? "")) return oauthError(reply, "invalid_client", "unknown client_id");
      if (!ctx.credentials.checkPassword(f.username, f.password)) return oauthError(reply, "invalid_grant", "wrong username or password");
      let issued;
      try {
        issued = ctx.tokens.issue(f.username);
      } catch (e) {
        if (isStorageUnavailable(e)) throw new HttpError(503, "unavailable", "storage cannot commit now; no token was issued");
        throw e;
      }
      return reply
        .headers({ "cache-control": "no-store", pragma: "no-cache" })
        .send({ access_token: issued.token, expires_in: issued.expiresIn, token_type: "Bearer" });
    });
  };
}
