// A config that works but is not finished for a site: what `sitegate init` could not know and
// left as an explicit placeholder, and an API only loopback may call while it listens on the
// network. `check-config` prints each by name and still exits 0 (the unit's ExecStartPre runs
// it), `run` logs each at warn and goes on (a bench may want it), and /healthz lists one
// `unfinished_config` warning ("degraded: unfinished config: ...") while any is left.
// Example secrets are not here: they are refused (config/example-secrets.ts).
import { BlockList, isIP } from "node:net";
import type { Config } from "./schema.js";
import type { HealthWarning } from "../metrics.js";

/** What `sitegate init` writes for the partner's organization: the nil UUID, which no partner issues. */
export const PLACEHOLDER_ORGANIZATION_ID = "00000000-0000-0000-0000-000000000000";

/** What `sitegate init` writes for the partner's URLs: a name that never resolves (RFC 6761 `.invalid`). */
export const PLACEHOLDER_PARTNER_URL = "https://partner.invalid";

export interface Unfinished {
  /** the config key, e.g. `partner.execution_url` */
  path: string;
  message: string;
}

/** Names reserved for documentation and tests (RFC 2606, RFC 6761): never a partner's. */
const PLACEHOLDER_HOST = /(^|\.)(invalid|example|test|example\.(com|net|org))\.?$/i;

function placeholderUrl(path: string, url: string): Unfinished | undefined {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined; // the schema refuses it already
  }
  if (!PLACEHOLDER_HOST.test(host)) return undefined;
  return { path, message: `${url} is a placeholder (a name reserved for examples, never a partner's): set the partner's URL` };
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/** Whether every address of the CIDR block is a loopback address. */
function loopbackOnly(cidr: string): boolean {
  const [addr = "", bits = ""] = cidr.split("/");
  const family = isIP(addr) === 6 ? "ipv6" : "ipv4";
  if (family === "ipv4") return LOOPBACK.check(addr, "ipv4") && Number(bits) >= 8;
  return addr === "::1" && Number(bits) === 128;
}

/** The host of `host:port` (`[::]:8443` gives `::`). */
function listenHost(listen: string): string {
  return listen.slice(0, listen.lastIndexOf(":")).replace(/^\[|\]$/g, "");
}

function loopbackListen(listen: string): boolean {
  const host = listenHost(listen);
  return host === "localhost" || (isIP(host) !== 0 && LOOPBACK.check(host, isIP(host) === 6 ? "ipv6" : "ipv4"));
}

/** Every sign of an unfinished config, by key, in the file's order. */
export function unfinishedConfig(cfg: Config): Unfinished[] {
  const out: Unfinished[] = [];
  if (cfg.organization_id === PLACEHOLDER_ORGANIZATION_ID)
    out.push({
      path: "organization_id",
      message: `${PLACEHOLDER_ORGANIZATION_ID} is the placeholder sitegate init writes: set the partner's organization id`,
    });
  const allow = cfg.auth.ip_allowlist;
  if (allow.length > 0 && allow.every(loopbackOnly) && !loopbackListen(cfg.http.listen))
    out.push({
      path: "auth.ip_allowlist",
      message: `${allow.join(", ")} admits loopback only, while the API listens on ${cfg.http.listen}: add the partner's addresses`,
    });
  for (const key of ["execution_url", "data_push_url"] as const) {
    const u = placeholderUrl(`partner.${key}`, cfg.partner[key]);
    if (u) out.push(u);
  }
  if (cfg.fleet) {
    const u = placeholderUrl("fleet.url", cfg.fleet.url);
    if (u) out.push(u);
  }
  return out;
}

/** The lines check-config prints (after "warning: ") and `run` logs. */
export function unfinishedLines(found: Unfinished[]): string[] {
  return found.map((u) => `unfinished config: ${u.path}: ${u.message}`);
}

/** The /healthz warning: one, naming every key, while anything is unfinished. */
export function unfinishedWarning(found: Unfinished[]): HealthWarning[] {
  if (found.length === 0) return [];
  return [
    {
      code: "unfinished_config",
      message: `degraded: unfinished config: ${found.map((u) => u.path).join(", ")} (sitegate check-config names each)`,
    },
  ];
}
