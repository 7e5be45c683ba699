// The fleet block of the config file (DESIGN B2): the optional MQTT v5 uplink to the fleet broker.
import { createPublicKey } from "node:crypto";
import { z } from "zod";
import { brokerUrl } from "../util/broker-url.js";

/** Optional MQTT v5 fleet uplink (DESIGN B2); absent = the gateway has no MQTT at all. */
function isEd25519PublicPem(pem: string): boolean {
  // createPublicKey would also take a private key (and derive its public half).
  if (!pem.includes("-----BEGIN PUBLIC KEY-----") || pem.includes("PRIVATE")) return false;
  try {
    return createPublicKey(pem).asymmetricKeyType === "ed25519";
  } catch {
    return false;
  }
}

export const fleetSchema = z
  .strictObject({
    url: brokerUrl.describe("The broker: mqtts:// anywhere, mqtt:// only to a loopback broker (no secrets in clear on a network)"),
    ca_file: z
      .string()
      .min(1)
      .optional()
      .describe("CA certificate (PEM) the broker's certificate is checked against; default: the system's roots"),
    cert_file: z.string().min(1).optional().describe("Client certificate (PEM); with key_file, instead of username and password"),
    key_file: z.string().min(1).optional().describe("The client certificate's private key (PEM)"),
    username: z.string().min(1).optional().describe("MQTT user name (with password or password_file)"),
    password: z.string().optional().describe("MQTT password (or password_file)"),
    password_file: z
      .string()
      .min(1)
      .optional()
      .describe(
        "A file the MQTT password is read from at start (a systemd credential, a 0600 file); exactly one of password and password_file",
      ),
    topic_prefix: z
      .string()
      .regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, "must be topic levels of letters, digits, . _ - (no wildcards)")
      .default("sitegate")
      .describe("First topic levels: {topic_prefix}/{site_id}/status|telemetry|events|devices|cmd/<name>"),
    keepalive_s: z.number().int().min(5).max(3600).default(60).describe("MQTT keep-alive interval (s)"),
    session_expiry_s: z
      .number()
      .int()
      .min(0)
      .max(604_800)
      .default(3600)
      .describe(
        "How long the broker keeps this gateway's session after its connection drops (s; MQTT 5 Session Expiry Interval): the command subscription survives a broker restart or a reconnect, and commands published meanwhile are delivered at their QoS; 0: a new session on every connect",
      ),
    will_delay_s: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .default(60)
      .describe(
        "How long the broker waits before it publishes the offline Last Will (s; MQTT 5 Will Delay Interval): a broker restart, failover or network blip shorter than this, after which the gateway reconnects, shows no offline status",
      ),
    client_id: z.string().min(1).max(128).optional().describe("MQTT client id; default: derived from site_id"),
    command_keys: z
      .array(z.string().refine(isEd25519PublicPem, { error: "must be an ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----)" }))
      .min(1, { error: "list at least one key, or leave command_keys out" })
      .max(16)
      .optional()
      .describe(
        "Ed25519 public keys (PEM) that may sign fleet commands; set, every command must be signed (docs/security.md#fleet-commands)",
      ),
    command_max_age_s: z
      .number()
      .int()
      .min(10)
      .max(86_400)
      .default(300)
      .describe("Oldest signed command accepted, by its sg-issued-at (s)"),
  })
  .superRefine((f, ctx) => {
    if ((f.cert_file === undefined) !== (f.key_file === undefined))
      ctx.addIssue({ code: "custom", path: [f.cert_file ? "key_file" : "cert_file"], message: "cert_file and key_file go together" });
    if (f.password !== undefined && f.password_file !== undefined)
      ctx.addIssue({ code: "custom", path: ["password_file"], message: "give password or password_file, not both" });
    if ((f.password !== undefined || f.password_file !== undefined) && f.username === undefined)
      ctx.addIssue({ code: "custom", path: ["username"], message: "required with password" });
    if (f.cert_file === undefined && f.username === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["username"],
        message: "a client certificate (cert_file + key_file) or username + password is required",
      });
  });

export type FleetConfig = z.infer<typeof fleetSchema>;
