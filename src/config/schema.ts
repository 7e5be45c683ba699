// The config file of DESIGN B2 as one zod schema: unknown keys are errors, defaults filled.
import { z } from "zod";
import { modbusDeclaredIds, modbusDevicesSchema, rtuPortsSchema } from "../modbus/config-schema.js";
import { SECRET_HASH_PATTERN } from "../util/secret-hash.js";
import { scheduleSchema } from "./schedule-schema.js";
import { gpioDeclaredIds, gpioSchema } from "../gpio/config-schema.js";
import { zigbeeDeclaredIds, zigbeeSchema } from "../zigbee/config-schema.js";
import { zoneProblem } from "./zones.js";

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

export { fleetSchema, type FleetConfig } from "./fleet-schema.js";
import { fleetSchema } from "./fleet-schema.js";

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
  allowed_urls: z
    .array(updateUrlPrefix)
    .max(16)
    .default([])
    .describe(
      "https:// folders ending in /: a requested bundle URL, and every redirect it takes, must be under one; empty: no fleet updates",
    ),
  allow_unsigned_requests: z
    .boolean()
    .default(false)
    .describe("Take update commands without fleet.command_keys (a bench); otherwise they are refused"),
  max_bundle_mb: z.number().int().min(1).max(4096).default(256).describe("The largest bundle a fleet request downloads (MB)"),
  download_dir: z
    .string()
    .min(1)
    .default("/var/lib/sitegate-update")
    .describe("Where root downloads a requested bundle: a folder only root can write, on the data partition"),
});
export type UpdateConfig = z.infer<typeof updateSchema>;
/**
 * The default telemetry commit interval (s), and so the default loss window of a power cut.
 * Each commit is synced, and costs the card about 24 KiB however few rows it adds (its WAL
 * blocks, and the journal commit and inode block of the WAL's new modification time): at 60 s
 * a 4-device site sends the card about 12 B a sample, at 30 s about 21 B, at 10 s about 53 B
 * (docs/sd-card.md, the trade-off; the budget is 15 B).
 */
export const TELEMETRY_COMMIT_S = 60;

export const UPDATE_DEFAULTS: UpdateConfig = {
  allowed_urls: [],
  allow_unsigned_requests: false,
  max_bundle_mb: 256,
  download_dir: "/var/lib/sitegate-update",
};

export const configSchema = z.strictObject({
  site_id: z.string().min(1).max(128).describe("The site this gateway answers for: the <site_id> of the partner API's paths"),
  organization_id: z
    .uuid()
    .describe("The partner organization: accepted by the admin endpoint, and the first part of every device_integration"),
  api_version: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/)
    .default("v1")
    .describe("The <API version> path segment of the partner API"),
  data_dir: z
    .string()
    .min(1)
    .default("/var/lib/sitegate")
    .describe(
      "SQLite databases and state: the package's state folder by default; a relative path resolves against the config file's folder (./var beside /etc/sitegate/config.yaml is /etc/sitegate/var), not the working folder",
    ),
  profiles_dir: z
    .string()
    .min(1)
    .default("/etc/sitegate/profiles")
    .describe("Device profiles of the site's own, in the built-in profiles' format, loaded at start (an absent folder: none)"),
  log_level: z
    .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
    .default("info")
    .describe("Log level; LOG_LEVEL in the environment overrides it"),
  http: z
    .strictObject({
      listen: listenAddr.default("127.0.0.1:8443").describe("host:port of the HTTPS partner API (sitegate init writes 0.0.0.0:8443)"),
      tls: z
        .strictObject({
          cert: z.string().min(1).describe("Certificate (PEM) the API serves"),
          key: z.string().min(1).describe("Its private key (PEM)"),
        })
        .describe("The API is HTTPS only"),
      rate_limit_per_min: z.number().int().positive().default(600).describe("Requests a minute per source address"),
      metrics_allow: z.array(cidr).default(["127.0.0.1/32", "::1/128"]).describe("Who may read /healthz and /metrics"),
    })
    .describe("The partner API's listener"),
  auth: z
    .strictObject({
      client_id: z.string().min(1).describe("The client_id the partner sends to /connect/token"),
      users: z
        .array(
          z.strictObject({
            username: z.string().min(1).describe("The partner's user name (also the status page login)"),
            password_hash: secretHash.describe("scrypt hash of the password: the last line sitegate hash-secret prints"),
          }),
        )
        .default([])
        .describe("Who may get a token at /connect/token and log in to the status page"),
      token_ttl_s: z.number().int().min(60).max(86400).default(3600).describe("Lifetime of a bearer token (s)"),
      api_keys: z
        .array(
          z.strictObject({
            name: z.string().min(1).describe("A name for the key (logs)"),
            key_hash: secretHash.describe("scrypt hash of the X-API-Key value: the last line sitegate hash-secret prints"),
          }),
        )
        .default([])
        .describe("Keys accepted in X-API-Key on /dr and /devicesync"),
      ip_allowlist: z
        .array(cidr)
        .default(["127.0.0.1/32", "::1/128"])
        .describe("Who may call /dr and /devicesync (sitegate init writes loopback only)"),
      admin_allowlist: z.array(cidr).optional().describe("Who may ask for a token and call /gateway/admin/; default: ip_allowlist"),
    })
    .transform((a) => ({ ...a, admin_allowlist: a.admin_allowlist ?? a.ip_allowlist }))
    .describe("Who may call the partner API, and with what"),
  partner: z
    .strictObject({
      headers: z
        .array(
          z
            .strictObject({
              name: z
                .string()
                .regex(/^[A-Za-z0-9-]+$/, "must be an HTTP header name")
                .describe("Header name"),
              value: z.string().optional().describe("Header value (or value_file)"),
              value_file: z
                .string()
                .min(1)
                .optional()
                .describe(
                  "A file the value is read from at start (a systemd credential, a 0600 file); exactly one of value and value_file",
                ),
            })
            .superRefine((h, ctx) => {
              if ((h.value === undefined) === (h.value_file === undefined))
                ctx.addIssue({ code: "custom", path: ["value"], message: "exactly one of value and value_file is required" });
            })
            // parseConfig fills value from value_file.
            .transform((h) => ({ name: h.name, value: h.value ?? "", value_file: h.value_file })),
        )
        .default([])
        .describe("Headers added to every callback to the partner"),
      execution_url: httpsUrl.describe("Where execution responses of dispatch events are posted (https:// only)"),
      data_push_url: httpsUrl.describe("Telemetry is posted to {data_push_url}/{api_version}/{data_push_path} (https:// only)"),
      data_push_path: z
        .string()
        .regex(/^[A-Za-z0-9._~/-]+$/)
        .default("telemetry")
        .describe("The last path segment of the data push URL"),
      timeout_ms: z.number().int().positive().default(10000).describe("Timeout of one callback request (ms)"),
      ca_file: z
        .string()
        .optional()
        .describe("Extra CA certificates (PEM) trusted for callbacks, e.g. a bench sink's self-signed certificate"),
    })
    .describe("Where the gateway sends execution responses and telemetry"),
  rtu_ports: rtuPortsSchema,
  telemetry: z
    .strictObject({
      poll_interval_ms: z
        .number()
        .int()
        .min(100)
        .max(3_600_000)
        .default(1000)
        .describe("How often the fast metrics of every device are read (ms)"),
      retention_max_mb: z.number().positive().default(512).describe("Bound of the telemetry store (MB); the oldest samples go first"),
      commit_interval_s: z
        .number()
        .int()
        .min(1)
        .max(60)
        .default(TELEMETRY_COMMIT_S)
        .describe(
          "Samples are committed (and synced) once per this many seconds (SD card wear: each commit costs the card about 24 KiB, however few samples it holds); a power cut loses at most that much. 1: every poll",
        ),
    })
    .default({ poll_interval_ms: 1000, retention_max_mb: 512, commit_interval_s: TELEMETRY_COMMIT_S })
    .describe("Polling and the sample store"),
  devices: modbusDevicesSchema,
  schedules: z
    .array(scheduleSchema)
    .default([])
    .describe("Local recurring dispatch events, at priority 100 below every partner event")
    .superRefine((list, ctx) => {
      const seen = new Set<string>();
      list.forEach((s, i) => {
        if (seen.has(s.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `schedule name "${s.name}" appears twice` });
        seen.add(s.name);
      });
    }),
  ui: z
    .strictObject({
      enabled: z.boolean().default(true).describe("Serve the status page (a ui block without it: served)"),
      listen: listenAddr.optional().describe("host:port of a listener of its own; default: the API's listener, under /ui/"),
      allow: z.array(cidr).default(UI_DEFAULT_ALLOW).describe("Who may open it; default: loopback and the private LAN ranges"),
      session_ttl_s: z
        .number()
        .int()
        .min(300)
        .max(7 * 86400)
        .default(43200)
        .describe("How long a login lasts (s)"),
    })
    .default({ enabled: false, allow: UI_DEFAULT_ALLOW, session_ttl_s: 43200 })
    .describe("The local status page (docs/status-page.md); absent or enabled: false: not served"),
  commissioning: z
    .strictObject({
      allow: z
        .array(cidr)
        .optional()
        .describe(
          "TCP hosts the status page's scan and read may reach (CIDRs); default: the private subnets of the gateway's own interfaces. RTU: only the ports of rtu_ports",
        ),
    })
    .default({})
    .describe("The status page's commissioning scan (docs/status-page.md): what it may reach"),
  fleet: fleetSchema.optional().describe("The MQTT v5 fleet uplink (docs/fleet.md); absent: no MQTT at all"),
  update: updateSchema.default(UPDATE_DEFAULTS).describe("Updates the fleet may request with its update command (docs/updates.md)"),
  zigbee: zigbeeSchema.optional().describe("Zigbee devices through a zigbee2mqtt bridge, its documented MQTT API (docs/devices.md)"),
  gpio: gpioSchema
    .optional()
    .describe("GPIO lines: outputs as switched loads, inputs with an optional local event while active (docs/devices.md)"),
  maintenance: z
    .strictObject({
      at: z
        .string()
        .regex(/^([01]\d|2[0-3]):[0-5]\d$/, "must be HH:MM (00:00-23:59)")
        .default("03:30")
        .describe("HH:MM, in timezone"),
      timezone: z
        .string()
        .regex(/^(local|UTC|[A-Za-z]+(\/[A-Za-z0-9_+-]+)+)$/, 'must be "local", "UTC" or a zone name such as Australia/Sydney')
        .superRefine((tz, ctx) => {
          const problem = zoneProblem(tz);
          if (problem) ctx.addIssue({ code: "custom", message: `${tz}: ${problem}` });
        })
        .default("local")
        .describe(
          "local (the controller's zone, timedatectl), UTC, or an IANA zone name such as Europe/Berlin (the daemon's TZ is left alone)",
        ),
    })
    .default({ at: "03:30", timezone: "local" })
    .describe("The nightly maintenance (WAL checkpoint, optimize), in local time by default"),
});

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;

/**
 * Each family's config block as the one device_id check sees it (config/device-ids.ts):
 * the ids it declares, by config path. A family with a config block adds its entry here,
 * beside its block in the schema above.
 */
export const CONFIG_BLOCK_IDS: ReadonlyArray<(cfg: Config) => Array<{ device_id: string; family: string; where: string }>> = [
  modbusDeclaredIds,
  zigbeeDeclaredIds,
  gpioDeclaredIds,
];
