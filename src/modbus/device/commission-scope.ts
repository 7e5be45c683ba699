// What the status page's commissioning may reach: an RTU port of `rtu_ports`,
// a TCP endpoint the daemon already polls, or a TCP endpoint whose host is an address in
// `commissioning.allow` (default: the private subnets of the gateway's own interfaces).
// Anything else is refused before a socket or a file is opened, so the scan is neither a
// port scanner of other networks nor a file-existence oracle (`rtu:/etc/shadow`).
import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { ProbeInputError } from "../../model/commissioning.js";
import type { Endpoint } from "../endpoint.js";

export interface CommissioningScope {
  /** The paths of `rtu_ports`. */
  rtuPaths: readonly string[];
  /** `commissioning.allow` (CIDRs); undefined: the private subnets of the gateway's own interfaces. */
  allow?: readonly string[] | undefined;
}

const PRIVATE = new BlockList();
for (const [net, bits] of [
  ["10.0.0.0", 8],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
] as const)
  PRIVATE.addSubnet(net, bits, "ipv4");
PRIVATE.addSubnet("fc00::", 7, "ipv6");

const family = (ip: string) => (isIP(ip) === 4 ? "ipv4" : "ipv6");

/** The private subnets the gateway's own interfaces are on (RFC 1918 and IPv6 unique local), as CIDRs. */
export function ownPrivateSubnets(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && !a.internal && a.cidr !== null && PRIVATE.check(a.address, family(a.address)))
    .map((a) => a!.cidr!);
}

function listOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const [addr = "", bits = ""] = c.split("/");
    if (isIP(addr)) list.addSubnet(addr, Number(bits), family(addr));
  }
  return list;
}

/** Refuses (ProbeInputError) an endpoint outside the scope; `polled`: the daemon already polls it. */
export function checkInScope(ep: Endpoint, polled: boolean, scope: CommissioningScope): void {
  if (ep.kind === "rtu") {
    if (!scope.rtuPaths.includes(ep.path))
      throw new ProbeInputError(
        `only a configured RTU port may be scanned (rtu_ports: ${scope.rtuPaths.join(", ") || "none"}); add the port to rtu_ports first`,
      );
    return;
  }
  if (polled) return;
  const host = ep.host.replace(/^::ffff:(?=\d+\.)/i, "");
  if (!isIP(host))
    throw new ProbeInputError("a TCP endpoint to scan must be an IP address (a host name is not checked against commissioning.allow)");
  const allow = scope.allow ?? ownPrivateSubnets();
  if (!listOf(allow).check(host, family(host)))
    throw new ProbeInputError(
      `${host} is outside commissioning.allow (${allow.join(", ") || "no private subnet on this gateway's interfaces"}); add its subnet there to scan it`,
    );
}
