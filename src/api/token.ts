// POST /connect/token: the OAuth 2.0 resource owner password grant (spec 4.1, RFC 6749
// section 4.3), answered per RFC 6749 5.1 / 5.2.
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

export function tokenRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.post("/connect/token", async (req, reply) => {
      const type = String(req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
      if (type !== "application/x-www-form-urlencoded") {
        return reply.code(415).send({ error: "invalid_request", error_description: "the token request must be application/x-www-form-urlencoded" });
      }
      const form = tokenForm.safeParse(req.body ?? {});
      if (!form.success) {
        const missing = form.error.issues.map((i) => String(i.path[0])).join(", ");
        return oauthError(reply, "invalid_request", `missing form field(s): ${missing}`);
      }
      const f = form.data;
      if (f.grant_type !== "password") return oauthError(reply, "unsupported_grant_type", `grant_type "${f.grant_type}" is not supported; use "password"`);
      if (!ctx.credentials.clientIdMatches(f.client_id)) return oauthError(reply, "invalid_client", "unknown client_id");
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
