// `sitegate scan`: probes a bus for the unit ids that answer; with --identify, names the
// profile whose identity registers each one holds.
import { readFileSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage, isSitegateError } from "../errors.js";
import { silentLogger } from "../log.js";
import { Bus } from "../modbus/bus.js";
import { ProbeInputError, checkEndpoint, checkScanRange, scanUnits, type ScanHit } from "../modbus/device/commission.js";
import { identifyUnit, type ProfileMatch } from "../modbus/device/identify.js";
import { builtinProfiles, siteProfiles } from "../profiles/registry.js";
import { scanWords } from "../modbus/device/scan-words.js";

/** Where --identify finds the site's own profiles unless --profiles-dir says otherwise (config's profiles_dir default). */
const DEFAULT_PROFILES_DIR = "/etc/sitegate/profiles";

/**
 * Who has a serial port open, for a scan that cannot lock it: each process whose open
 * files include the device (/proc/PID/fd), with its command line. Processes of other users
 * are not visible without root: then the message says what it most likely is.
 */
export function heldBy(path: string, proc = "/proc"): string {
  const holders: string[] = [];
  let target: string;
  try {
    target = realpathSync(path);
  } catch {
    target = path;
  }
  for (const pid of readdirSafe(proc).filter((d) => /^\d+$/.test(d) && Number(d) !== process.pid)) {
    const fds = readdirSafe(join(proc, pid, "fd"));
    if (!fds.some((fd) => readlinkSafe(join(proc, pid, "fd", fd)) === target)) continue;
    let cmd = "";
    try {
      cmd = readFileSync(join(proc, pid, "cmdline"), "utf8")
        .split("\0")
        .filter(Boolean)
        .join(" ");
    } catch {
      // gone meanwhile
    }
    holders.push(`pid ${pid}${cmd ? ` (${cmd.length > 120 ? cmd.slice(0, 119) + "…" : cmd})` : ""}`);
  }
  const gateway = "scan it from the status page's commissioning form instead, which probes through the gateway's own bus";
  if (holders.length) return `${path} is held by ${holders.join(", ")}: if that is the gateway, ${gateway}`;
  return `${path} is held by another process (not one this user can see: run as root to name it); if the gateway runs, ${gateway}`;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readlinkSafe(p: string): string | undefined {
  try {
    return readlinkSync(p);
  } catch {
    return undefined;
  }
}

function bar(done: number, total: number, found: number): string {
  const width = 30;
  const filled = Math.round((done / total) * width);
  return `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} probed, ${found} found`;
}

/** A scan stops after this long unless --max-s says otherwise (a wrong --timeout-ms on 247 silent ids is 40 minutes). */
const DEFAULT_MAX_S = 600;

const command: Command = {
  summary: "Probe unit ids (1..247 by default) and list the ones that answer (--identify: and the profile each one matches).",
  usage:
    "sitegate scan --endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 [--from 1] [--to 247] [--timeout-ms 300] [--max-s 600] [--identify [--profiles-dir DIR]] [--json]",
  options: {
    endpoint: { type: "string", short: "e" },
    from: { type: "string" },
    to: { type: "string" },
    "timeout-ms": { type: "string" },
    "max-s": { type: "string" },
    json: { type: "boolean" },
    identify: { type: "boolean" },
    "profiles-dir": { type: "string" },
  },
  async run(values) {
    if (typeof values.endpoint !== "string") throw new UsageError("--endpoint is required");
    const maxS = Number(values["max-s"] ?? DEFAULT_MAX_S);
    if (!Number.isInteger(maxS) || maxS < 1 || maxS > 86_400) throw new UsageError("--max-s must be whole seconds 1..86400");
    let endpoint, range;
    try {
      endpoint = checkEndpoint(values.endpoint);
      range = checkScanRange(values.from, values.to, values["timeout-ms"]);
    } catch (e) {
      if (e instanceof ProbeInputError)
        throw new UsageError(e.message.replace(/^from\/to/, "--from/--to").replace(/^timeout/, "--timeout-ms"));
      throw e;
    }
    const profiles = values.identify ? siteProfiles(String(values["profiles-dir"] ?? DEFAULT_PROFILES_DIR)) : null;
    for (const e of profiles?.errors ?? []) process.stderr.write(`sitegate scan: profile left out: ${e.path}: ${e.message}\n`);
    const bus = new Bus(endpoint, silentLogger());
    let found: ScanHit[];
    const matches = new Map<number, ProfileMatch[]>();
    const tty = process.stderr.isTTY === true;
    // The time cap: the probes so far are the answer, with a note on what is left.
    const cap = new AbortController();
    const timer = setTimeout(() => cap.abort(), maxS * 1000);
    let probed = 0;
    try {
      found = await scanUnits(
        bus,
        range,
        (p) => {
          probed = p.probed;
          if (tty) process.stderr.write(bar(p.probed, p.total, p.found.length));
        },
        cap.signal,
      );
      for (const hit of profiles ? found : []) matches.set(hit.unit, await identifyUnit(bus, hit.unit, profiles!, range.timeoutMs));
    } catch (e) {
      if (isSitegateError(e, "MODBUS_DISCONNECTED")) {
        if (tty) process.stderr.write("\n");
        const held = endpoint.kind === "rtu" && e.details.some((d) => d.path === "port_locked") ? `\n${heldBy(endpoint.path)}` : "";
        process.stderr.write(`sitegate scan: ${errorMessage(e)}${held}\n`);
        return 1;
      }
      throw e;
    } finally {
      clearTimeout(timer);
      await bus.close();
    }
    if (tty) process.stderr.write("\n");
    const total = range.to - range.from + 1;
    const capped = cap.signal.aborted && probed < total;
    if (capped)
      process.stderr.write(
        `sitegate scan: stopped at the ${maxS} s time cap after ${probed} of ${total} unit ids; go on with --from ${range.from + probed}\n`,
      );
    const listed = found.map((f) => (profiles ? { ...f, profiles: matches.get(f.unit) ?? [] } : f));
    if (values.json) process.stdout.write(JSON.stringify({ endpoint: values.endpoint, found: listed, probed, total, capped }) + "\n");
    else {
      const known = profiles ?? builtinProfiles();
      const lines = found.map((f) => scanWords(f, profiles ? (matches.get(f.unit) ?? []) : undefined, known));
      if (found.length && !profiles) lines.push("(--identify names what each one is)");
      process.stdout.write(found.length ? lines.join("\n") + "\n" : "no unit answered\n");
    }
    return EXIT_OK;
  },
};
export default command;
