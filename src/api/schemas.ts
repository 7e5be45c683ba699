// Request and response schemas of the API: they validate the requests and they are the
// OpenAPI document (z.toJSONSchema), so the two cannot drift apart.
import { z } from "zod";
import { CAPABILITIES } from "../model/vocabulary.js";

export const tokenForm = z.object({
  grant_type: z.string({ error: "required" }),
  client_id: z.string().optional().describe("required unless the client sends it by HTTP Basic (RFC 6749 2.3.1), with an empty secret"),
  username: z.string({ error: "required" }),
  password: z.string({ error: "required" }),
});

export const tokenResponse = z.object({ access_token: z.string(), expires_in: z.number().int(), token_type: z.literal("Bearer") });

export { MAX_CONFIGURE_DEVICES, configureBody } from "../services/schemas.js";

export const configureQuery = z.object({ organizationId: z.string({ error: "required" }), moleculeId: z.string({ error: "required" }) });

export const configureResponse = z.object({
  devices: z.array(
    z.object({
      device_id: z.string(),
      status: z.enum(["accepted", "error"]),
      code: z.enum(["PAIRING_FAILED", "REGISTRY_WRITE_FAILED"]).optional(),
      message: z.string(),
    }),
  ),
});

export const deviceSyncResponse = z.object({
  site_id: z.string(),
  devices: z.array(
    z.object({
      device_id: z.string(),
      device_type: z.number().int(),
      device_max_power: z.number().int().optional(),
      device_op_mode: z.number().int().min(0).max(4).optional(),
      name: z.string().optional(),
      capabilities: z.array(z.enum(CAPABILITIES)),
    }),
  ),
});

export const errorBody = z.object({
  error: z.string(),
  message: z.string(),
  details: z.array(z.object({ path: z.string(), message: z.string() })),
});

export const oauthError = z.object({
  error: z.enum(["invalid_request", "invalid_client", "invalid_grant", "unsupported_grant_type"]),
  error_description: z.string(),
});
