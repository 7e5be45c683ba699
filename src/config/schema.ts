// The config file of DESIGN B2 as one zod schema: unknown keys are errors, defaults filled.
import { createPublicKey } from "node:crypto";
import { z } from "zod";
import { deviceConfigSchema } from "./device-schema.js";
import { SECRET_HASH_PATTERN } from "../util/secret-hash.js";
import { scheduleSchema } from "./schedule-schema.js";
import { gpioSchema, zigbeeSchema } from "./local-schema.js";
import { zoneProblem } from "./zones.js";
import { brokerUrl } from "./broker-url.js";

const httpsUrl = z.url({ error: "must be a URL" }).refine((u) => u.startsWith("https://"), {
  error: "must be an https:// URL (callbacks are HTTPS only)",
});

const secretHash = z
  .string({ error: "required" })
  .regex(
    SECRET_HASH_PATTERN,
    "must be an scrypt hash: the last line `sitegate hash-secret` prints (or let `sitegate init` write the config)",
  );

/** "host:port"; port 1-65535, or 0 for a port the kernel picks (the tests). */
const listenAddr = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be "host:port"')
  .refine((s) => Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535, { error: "the port must be 1-65535" });

const cidr = z.union([z.cidrv4(), z.cidrv6()], { error: "must be a CIDR block like 127.0.0.1/32 or ::1/128" });

/** Who may open the status page by default: loopback and the private LAN ranges (an installer on site). */
export const UI_DEFAULT_ALLOW = [
  "127.0.0.1/32",
  "::1/128",
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "169.254.0.0/16",
  "fc00::/7",
  "fe80::/10",
];

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
    /** mqtts://host[:port]; plain mqtt:// only to a loopback broker (no secrets in clear on a network). */
    url: brokerUrl,
    ca_file: z.string().min(1).optional(),
    cert_file: z.string().min(1).optional(),
    key_file: z.string().min(1).optional(),
    username: z.string().min(1).optional(),
    password: z.string().optional(),
    /** The password read from this file at start instead (exactly one of password and password_file). */
    password_file: z.string().min(1).optional(),
    topic_prefix: z
      .string()
      .regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, "must be topic levels of letters, digits, . _ - (no wildcards)")
      .default("sitegate"),
    keepalive_s: z.number().int().min(5).max(3600).default(60),
    client_id: z.string().min(1).max(128).optional(),
    /** Ed25519 public keys (PEM) of who may send commands; set, every command must be signed (docs/fleet-security.md). */
    command_keys: z
      .array(z.string().refine(isEd25519PublicPem, { error: "must be an ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----)" }))
      .min(1, { error: "list at least one key, or leave command_keys out" })
      .max(16)
      .optional(),
    /** Oldest signed command accepted, by its issued_at. */
    command_max_age_s: z.number().int().min(10).max(86_400).default(300),
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

/** A folder of update bundles the fleet may name: an https:// URL ending in "/", no user, query or fragment. */
const updateUrlPrefix = z.url({ error: "must be a URL" }).superRefine((s, ctx) => {
  const u = new URL(s);
  const bad =
    u.protocol !== "https:"
      ? "must be an https:// URL"
      : u.username || u.password
        ? "must not carry a user name or password"
        : u.search || u.hash || s.includes("?") || s.includes("#")
          ? "must have no query or fragment"
          : !u.pathname.endsWith("/")
            ? 'must end with "/" (a folder of bundles; a request URL must start with it)'
            : null;
  if (bad) ctx.addIssue({ code: "custom", message: bad });
});

/** Updates the fleet may request with the `update` command (docs/updates.md). */
export const updateSchema = z.strictObject({
  /** A requested bundle URL, and every redirect it takes, must start with one of these; empty: no fleet updates. */
  allowed_urls: z.array(updateUrlPrefix).max(16).default([]),
  /** Take `update` commands without fleet.command_keys (a bench); otherwise they are refused. */
  allow_unsigned_requests: z.boolean().default(false),
  /** The largest bundle a fleet request downloads. */
  max_bundle_mb: z.number().int().min(1).max(4096).default(256),
  /** Where root downloads a requested bundle: a folder only root can write, on the data partition. */
  download_dir: z.string().min(1).default("/var/lib/sitegate-update"),
});
export type UpdateConfig = z.infer<typeof updateSchema>;
export const UPDATE_DEFAULTS: UpdateConfig = {
  allowed_urls: [],
  allow_unsigned_requests: false,
  max_bundle_mb: 256,
  download_dir: "/var/lib/sitegate-update",
};
/**
 * An RTU port: its device path, or the path with its line settings. The plain string
 * means 9600 baud 8N1. The baud is the line's until a device is configured on it: the
 * devices of one port share one baud (their mb_baud).
 */
const rtuPortObject = z.strictObject({
  path: z.string().min(1),
  baud: z.number().int().min(300).max(921600).default(9600),
  parity: z.enum(["none", "even", "odd"]).default("none"),
  stop_bits: z.union([z.literal(1), z.literal(2)], { error: "must be 1 or 2" }).default(1),
});
export type RtuPortConfig = z.output<typeof rtuPortObject>;
const rtuPort = z.union(
  [
    z
      .string()
      .min(1)
      .transform((path): RtuPortConfig => ({ path, baud: 9600, parity: "none", stop_bits: 1 })),
    rtuPortObject,
  ],
  { error: "must be a serial device path or { path, baud, parity, stop_bits }" },
);

export const configSchema = z.strictObject({
  site_id: z.string().min(1).max(128),
  organization_id: z.uuid(),
  api_version: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/)
    .default("v1"),
  data_dir: z.string().min(1).default("./var"),
  /** Device profiles of the site's own, in the built-in profiles' format (absent folder: none). */
  profiles_dir: z.string().min(1).default("/etc/sitegate/profiles"),
  log_level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  http: z.strictObject({
    listen: listenAddr.default("127.0.0.1:8443"),
    tls: z.strictObject({ cert: z.string().min(1), key: z.string().min(1) }),
    rate_limit_per_min: z.number().int().positive().default(600),
    metrics_allow: z.array(cidr).default(["127.0.0.1/32", "::1/128"]),
  }),
  auth: z
    .strictObject({
      client_id: z.string().min(1),
      users: z.array(z.strictObject({ username: z.string().min(1), password_hash: secretHash })).default([]),
      token_ttl_s: z.number().int().min(60).max(86400).default(3600),
      api_keys: z.array(z.strictObject({ name: z.string().min(1), key_hash: secretHash })).default([]),
      ip_allowlist: z.array(cidr).default(["127.0.0.1/32", "::1/128"]),
      /** Who may ask for a token and call /gateway/admin/ (default: ip_allowlist). */
      admin_allowlist: z.array(cidr).optional(),
    })
    .transform((a) => ({ ...a, admin_allowlist: a.admin_allowlist ?? a.ip_allowlist })),
  partner: z.strictObject({
    headers: z
      .array(
        z
          .strictObject({
            name: z.string().regex(/^[A-Za-z0-9-]+$/, "must be an HTTP header name"),
            value: z.string().optional(),
            /** The value read from this file at start (a systemd credential, a 0600 file). */
            value_file: z.string().min(1).optional(),
          })
          .superRefine((h, ctx) => {
            if ((h.value === undefined) === (h.value_file === undefined))
              ctx.addIssue({ code: "custom", path: ["value"], message: "exactly one of value and value_file is required" });
          })
          // parseConfig fills value from value_file.
          .transform((h) => ({ name: h.name, value: h.value ?? "", value_file: h.value_file })),
      )
      .default([]),
    execution_url: httpsUrl,
    data_push_url: httpsUrl,
    data_push_path: z
      .string()
      .regex(/^[A-Za-z0-9._~/-]+$/)
      .default("telemetry"),
    timeout_ms: z.number().int().positive().default(10000),
    // Extra CA certificates (PEM file) trusted for callbacks, e.g. a bench sink's self-signed cert.
    ca_file: z.string().optional(),
  }),
  rtu_ports: z.record(z.string().regex(/^\d+$/, "keys are RTU port numbers"), rtuPort).default({}),
  telemetry: z
    .strictObject({
      poll_interval_ms: z.number().int().min(100).max(3_600_000).default(1000),
      retention_max_mb: z.number().positive().default(512),
      /** Telemetry is committed in one transaction per this many seconds (SD card wear); a power cut loses at most that much. 1: every poll. */
      commit_interval_s: z.number().int().min(1).max(60).default(10),
    })
    .default({ poll_interval_ms: 1000, retention_max_mb: 512, commit_interval_s: 10 }),
  devices: z.array(deviceConfigSchema).default([]),
  /** Local recurring dispatch events (DESIGN B4), at priority 100 below every partner event. */
  schedules: z
    .array(scheduleSchema)
    .default([])
    .superRefine((list, ctx) => {
      const seen = new Set<string>();
      list.forEach((s, i) => {
        if (seen.has(s.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `schedule name "${s.name}" appears twice` });
        seen.add(s.name);
      });
    }),
  /** Local status page: absent or enabled: false = not served. */
  ui: z
    .strictObject({
      enabled: z.boolean().default(true),
      listen: listenAddr.optional(),
      allow: z.array(cidr).default(UI_DEFAULT_ALLOW),
      session_ttl_s: z
        .number()
        .int()
        .min(300)
        .max(7 * 86400)
        .default(43200),
    })
    .default({ enabled: false, allow: UI_DEFAULT_ALLOW, session_ttl_s: 43200 }),
  fleet: fleetSchema.optional(),
  update: updateSchema.default(UPDATE_DEFAULTS),
  /** Zigbee devices through a zigbee2mqtt bridge (its documented MQTT API). */
  zigbee: zigbeeSchema.optional(),
  /** GPIO lines: outputs as switched loads, inputs (with an optional local event while active). */
  gpio: gpioSchema.optional(),
  /** The nightly maintenance (WAL checkpoint, optimize): a time of day in the controller's local time, UTC or a named zone. */
  maintenance: z
    .strictObject({
      at: z
        .string()
        .regex(/^([01]\d|2[0-3]):[0-5]\d$/, "must be HH:MM (00:00-23:59)")
        .default("03:30"),
      timezone: z
        .string()
        .regex(/^(local|UTC|[A-Za-z]+(\/[A-Za-z0-9_+-]+)+)$/, 'must be "local", "UTC" or a zone name such as Australia/Sydney')
        .superRefine((tz, ctx) => {
          const problem = zoneProblem(tz);
          if (problem) ctx.addIssue({ code: "custom", message: `${tz}: ${problem}` });
        })
        .default("local"),
    })
    .default({ at: "03:30", timezone: "local" }),
});

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
