// The config file of DESIGN B2 as one zod schema: unknown keys are errors, defaults filled.
import { z } from "zod";
import { deviceConfigSchema } from "./device-schema.js";
import { SECRET_HASH_PATTERN } from "../util/secret-hash.js";
import { scheduleSchema } from "./schedule-schema.js";

const httpsUrl = z.url({ error: "must be a URL" }).refine((u) => u.startsWith("https://"), {
  error: "must be an https:// URL (callbacks are HTTPS only)",
});

const secretHash = z
  .string({ error: "required" })
  .regex(SECRET_HASH_PATTERN, "must be an scrypt hash made by `sitegate hash-secret`");

const listenAddr = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be "host:port"');

const cidr = z.union([z.cidrv4(), z.cidrv6()], { error: "must be a CIDR block like 127.0.0.1/32 or ::1/128" });

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
  [z.string().min(1).transform((path): RtuPortConfig => ({ path, baud: 9600, parity: "none", stop_bits: 1 })), rtuPortObject],
  { error: "must be a serial device path or { path, baud, parity, stop_bits }" },
);

export const configSchema = z.strictObject({
  site_id: z.string().min(1).max(128),
  organization_id: z.uuid(),
  api_version: z.string().regex(/^[A-Za-z0-9._-]+$/).default("v1"),
  data_dir: z.string().min(1).default("./var"),
  log_level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  http: z.strictObject({
    listen: listenAddr.default("127.0.0.1:8443"),
    tls: z.strictObject({ cert: z.string().min(1), key: z.string().min(1) }),
    rate_limit_per_min: z.number().int().positive().default(600),
    metrics_allow: z.array(cidr).default(["127.0.0.1/32", "::1/128"]),
  }),
  auth: z.strictObject({
    client_id: z.string().min(1),
    users: z.array(z.strictObject({ username: z.string().min(1), password_hash: secretHash })).default([]),
    token_ttl_s: z.number().int().min(60).max(86400).default(3600),
    api_keys: z.array(z.strictObject({ name: z.string().min(1), key_hash: secretHash })).default([]),
    ip_allowlist: z.array(cidr).default(["127.0.0.1/32", "::1/128"]),
  }),
  partner: z.strictObject({
    headers: z
      .array(z.strictObject({ name: z.string().regex(/^[A-Za-z0-9-]+$/, "must be an HTTP header name"), value: z.string() }))
      .default([]),
    execution_url: httpsUrl,
    data_push_url: httpsUrl,
    data_push_path: z.string().regex(/^[A-Za-z0-9._~/-]+$/).default("telemetry"),
    timeout_ms: z.number().int().positive().default(10000),
    // Extra CA certificates (PEM file) trusted for callbacks, e.g. a bench sink's self-signed cert.
    ca_file: z.string().optional(),
  }),
  rtu_ports: z.record(z.string().regex(/^\d+$/, "keys are RTU port numbers"), rtuPort).default({}),
  telemetry: z
    .strictObject({
      poll_interval_ms: z.number().int().min(100).max(3_600_000).default(1000),
      retention_max_mb: z.number().positive().default(512),
    })
    .default({ poll_interval_ms: 1000, retention_max_mb: 512 }),
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
});

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
