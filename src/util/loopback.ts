// Which hosts are this machine's own, and a broker URL read the one way the MQTT client
// will use it. A plain mqtt:// connection carries passwords and commands in clear, so it
// may only go to a loopback broker; "loopback" is decided on the parsed host, never on a
// prefix of the text (`127.evil.example` is a DNS name anywhere on the network).
import { isIPv4, isIPv6 } from "node:net";
import { SitegateError } from "../errors.js";

/** An IPv4 literal in 127.0.0.0/8, the IPv6 literal ::1 (any spelling, with or without brackets), or `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  if (h.toLowerCase() === "localhost") return true;
  if (isIPv4(h)) return h.split(".")[0] === "127";
  if (isIPv6(h)) return ipv6Words(h)?.every((w, i) => w === (i === 7 ? 1 : 0)) ?? false;
  return false;
}

/** The eight 16-bit words of an IPv6 literal (no zone, no embedded IPv4), or undefined. */
function ipv6Words(h: string): number[] | undefined {
  if (h.includes("%") || h.includes(".")) return undefined;
  const [head, tail, more] = h.split("::");
  if (more !== undefined) return undefined;
  const part = (s: string | undefined) => (s ? s.split(":").map((x) => Number.parseInt(x, 16)) : []);
  const a = part(head);
  const b = part(tail);
  const fill = tail === undefined ? 0 : 8 - a.length - b.length;
  const words = [...a, ...Array<number>(fill).fill(0), ...b];
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined;
}

export interface BrokerEndpoint {
  protocol: "mqtt" | "mqtts";
  /** Without brackets: what net.connect and tls.connect take. */
  host: string;
  port: number;
}

/**
 * A broker URL as `mqtt[s]://host[:port]` and nothing else, or why not. User info, a path,
 * a query or a backslash are refused: MQTT.js reads a URL string with the legacy
 * url.parse, which disagrees with the WHATWG parser on such input
 * (`mqtt://evil.example\@127.0.0.1` is 127.0.0.1 to one and evil.example to the other).
 * The client is given the parsed host and port instead of the string.
 */
export function parseBrokerUrl(text: string): BrokerEndpoint | { error: string } {
  if (/[\\\s@]/.test(text)) return { error: "must be mqtt[s]://host[:port] (no user info, spaces or backslashes)" };
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return { error: "must be a URL" };
  }
  if (u.protocol !== "mqtt:" && u.protocol !== "mqtts:") return { error: "must be an mqtts:// or mqtt:// URL" };
  if ((u.pathname !== "" && u.pathname !== "/") || u.search !== "" || u.hash !== "")
    return { error: "must be mqtt[s]://host[:port] (no path, query or fragment)" };
  if (u.hostname === "") return { error: "names no host" };
  if (u.port === "0") return { error: "port must be 1-65535" };
  const protocol = u.protocol === "mqtts:" ? "mqtts" : "mqtt";
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  return { protocol, host, port: u.port ? Number(u.port) : protocol === "mqtts" ? 8883 : 1883 };
}

/** Why a broker URL may not be used (undefined: it may): mqtts anywhere, plain mqtt only to a loopback host. */
export function brokerUrlProblem(text: string): string | undefined {
  const e = parseBrokerUrl(text);
  if ("error" in e) return e.error;
  if (e.protocol === "mqtt" && !isLoopbackHost(e.host))
    return `must be an mqtts:// URL (mqtt:// only to a loopback broker: 127.0.0.0/8, ::1 or localhost; not ${e.host})`;
  return undefined;
}

/** The endpoint of a URL the config has already accepted. */
export function brokerEndpoint(text: string): BrokerEndpoint {
  const e = parseBrokerUrl(text);
  if ("error" in e) throw new SitegateError("CONFIG_INVALID", `broker URL ${text}: ${e.error}`);
  return e;
}
