// Commissioning probes shared by `sitegate scan` / `sitegate read` and the status page:
// input checks with one-sentence messages, a unit-id scan with progress, and a one-device
// read (pair, then every metric). The functions take the bus they are given (a fresh one,
// or the daemon's); `ModbusCommissioning` is the Modbus family's `Commissioning`, which
// picks that bus itself, so the status page asks it and never sees a bus.
import { SitegateError, errorMessage, isSitegateError } from "../../errors.js";
import { Bus, PRIORITY, type BusManager } from "../bus.js";
import { endpointKey, parseEndpoint, type Endpoint } from "../endpoint.js";
import { DeviceDriver } from "./driver.js";
import { checkInScope, type CommissioningScope } from "./commission-scope.js";
import type { ProfileRegistry } from "../../profiles/registry.js";
import { identifyUnit, type ProfileMatch } from "./identify.js";
import { wireLabel } from "../../model/roles.js";
import { scanWords } from "./scan-words.js";
import type { Logger } from "../../log.js";
import {
  ProbeInputError,
  type Commissioning,
  type CommissioningLink,
  type ReadInput,
  type ReadPlan,
  type ReadResult,
  type ScanHit,
  type ScanInput,
  type ScanPlan,
  type ScanProgress,
} from "../../model/commissioning.js";

export { ProbeInputError, type ReadResult, type ScanHit, type ScanProgress };

export interface ScanRange {
  from: number;
  to: number;
  timeoutMs: number;
}

export function checkEndpoint(text: unknown): Endpoint {
  if (typeof text !== "string" || text.trim() === "")
    throw new ProbeInputError("an endpoint is required, e.g. tcp://192.168.1.20:502 or rtu:/dev/ttyUSB0?baud=9600");
  try {
    return parseEndpoint(text.trim());
  } catch (e) {
    throw new ProbeInputError(errorMessage(e));
  }
}

/** Unit ids for a scan: 1..247 (the Modbus unicast range), from <= to; timeout >= 20 ms. */
export function checkScanRange(from: unknown, to: unknown, timeoutMs: unknown): ScanRange {
  const f = Number(from ?? 1);
  const t = Number(to ?? 247);
  const ms = Number(timeoutMs ?? 300);
  if (!Number.isInteger(f) || !Number.isInteger(t) || f < 1 || t > 247 || f > t)
    throw new ProbeInputError("from/to must be unit ids 1..247 with from <= to");
  if (!Number.isInteger(ms) || ms < 20 || ms > 10_000) throw new ProbeInputError("timeout must be 20..10000 ms");
  return { from: f, to: t, timeoutMs: ms };
}

/** A unit id to read: 0..255 (0 and 248+ only make sense behind TCP gateways). */
export function checkUnit(v: unknown): number {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 0 || n > 255) throw new ProbeInputError("unit must be a number 0..255");
  return n;
}

export function checkProfile(profiles: ProfileRegistry, name: unknown): string {
  if (typeof name !== "string" || !profiles.has(name)) throw new ProbeInputError(`profile must be one of: ${profiles.names().join(", ")}`);
  return name;
}

/**
 * The exception code a device answered with, from the MODBUS_EXCEPTION error's
 * `exception_code` entry (the transport puts the number there; the message is for people).
 * Undefined for any other error, or when the entry is missing or not a code.
 */
export function modbusExceptionCode(e: unknown): number | undefined {
  if (!isSitegateError(e, "MODBUS_EXCEPTION")) return undefined;
  const entry = e.details.find((d) => d.path === "exception_code")?.message;
  const code = entry !== undefined && /^[0-9]{1,3}$/.test(entry) ? Number(entry) : NaN;
  return Number.isInteger(code) && code >= 1 && code <= 255 ? code : undefined;
}

/**
 * Probes each unit id with a one-register read. A register answer or a Modbus exception
 * (other than 10/11: a TCP gateway saying nobody is behind that id) counts as found.
 * Throws MODBUS_DISCONNECTED when the very first probe cannot reach the endpoint.
 */
export async function scanUnits(
  bus: Bus,
  range: ScanRange,
  onProgress?: (p: ScanProgress) => void,
  signal?: AbortSignal,
): Promise<ScanHit[]> {
  const found: ScanHit[] = [];
  const total = range.to - range.from + 1;
  for (let unit = range.from; unit <= range.to; unit++) {
    if (signal?.aborted) break;
    try {
      // Below polling: on a bus the daemon polls, a probe only takes the bus when no poll waits.
      await bus.read(unit, "holding", 0, 1, { priority: PRIORITY.scan, timeoutMs: range.timeoutMs, retries: 0 });
      found.push({ unit, answer: "registers" });
    } catch (e) {
      const code = modbusExceptionCode(e);
      if (code !== undefined) {
        if (code !== 10 && code !== 11) found.push({ unit, answer: `exception ${code}` });
      } else if (isSitegateError(e, "MODBUS_DISCONNECTED") && unit === range.from) {
        throw e;
      }
    }
    onProgress?.({ probed: unit - range.from + 1, total, found });
  }
  return found;
}

/** Pairs one device with a profile and reads every metric; throws a SitegateError naming what failed. */
export async function readDevice(
  bus: Bus,
  endpointText: string,
  unit: number,
  profiles: ProfileRegistry,
  profileName: string,
): Promise<ReadResult> {
  const driver = new DeviceDriver(bus, unit, profiles.get(profileName));
  let descriptor, metrics;
  try {
    descriptor = await driver.pair();
    metrics = await driver.read(["fast", "slow"]);
  } catch (e) {
    throw new SitegateError("PAIRING_FAILED", `unit ${unit} at ${endpointText} did not answer as ${profileName}: ${errorMessage(e)}`);
  }
  const device = {
    endpoint: endpointText,
    unit,
    profile: descriptor.profile,
    device_type: descriptor.device_type,
    ...(descriptor.max_power_w !== undefined ? { max_power_w: descriptor.max_power_w } : {}),
    ...descriptor.identity,
  };
  // The device type in words too (the status page's and device sync's name for the code).
  const labels: Record<string, string> = { device_type: wireLabel(descriptor.device_type) };
  for (const [k, v] of Object.entries(metrics)) {
    const name = driver.label(k, v);
    if (name !== undefined) labels[k] = name;
  }
  return { device, metrics, labels, unavailable: driver.unavailable.list().map((u) => u.metric) };
}

/** On a bus the daemon polls, a probe holds the line at most this long (a poll waits behind it). */
export const SHARED_PROBE_TIMEOUT_MS = 1000;

/**
 * The Modbus family's commissioning, for the status page. An endpoint the daemon already
 * polls goes through the daemon's own bus (its queue, so a serial port is never opened
 * twice) and each probe there waits at most SHARED_PROBE_TIMEOUT_MS, so polling goes on;
 * any other endpoint gets a bus of its own, closed with the link.
 */
export class ModbusCommissioning implements Commissioning {
  constructor(
    private readonly buses: Pick<BusManager, "all">,
    private readonly profiles: ProfileRegistry,
    private readonly log: Logger,
    /** What it may reach: the configured RTU ports, and TCP hosts in commissioning.allow (commission-scope.ts). */
    private readonly scope: CommissioningScope,
  ) {}

  /** The endpoint of a form, refused when outside the scope (nothing is opened for it). */
  private endpointInScope(text: unknown): Endpoint {
    const ep = checkEndpoint(text);
    checkInScope(ep, this.sharedBus(ep) !== undefined, this.scope);
    return ep;
  }

  checkScan(input: ScanInput): ScanPlan {
    const ep = this.endpointInScope(input.endpoint);
    const asked = checkScanRange(input.from, input.to, input.timeout_ms);
    const shared = this.sharedBus(ep) !== undefined;
    const timeoutMs = shared ? Math.min(asked.timeoutMs, SHARED_PROBE_TIMEOUT_MS) : asked.timeoutMs;
    return { endpoint: String(input.endpoint).trim(), from: asked.from, to: asked.to, timeoutMs, shared };
  }

  checkRead(input: ReadInput): ReadPlan {
    this.endpointInScope(input.endpoint);
    const unit = checkUnit(input.unit);
    return { endpoint: String(input.endpoint).trim(), unit, profile: checkProfile(this.profiles, input.profile) };
  }

  open(endpoint: string): CommissioningLink {
    const ep = this.endpointInScope(endpoint);
    const shared = this.sharedBus(ep);
    const bus = shared ?? new Bus(ep, this.log.child({ bus: endpointKey(ep), commissioning: true }));
    const { profiles } = this;
    const matched = new Map<number, ProfileMatch[]>();
    return {
      scan: (plan, onProgress, signal) => scanUnits(bus, plan, onProgress, signal),
      identify: async (unit, timeoutMs) => {
        const m = await identifyUnit(bus, unit, profiles, timeoutMs);
        matched.set(unit, m);
        return m.map((x) => x.profile);
      },
      describe: (hit) => scanWords(hit, matched.get(hit.unit), profiles),
      read: (plan) => readDevice(bus, plan.endpoint, plan.unit, profiles, plan.profile),
      close: async () => {
        if (!shared) await bus.close().catch(() => undefined);
      },
    };
  }

  private sharedBus(ep: Endpoint): Bus | undefined {
    return this.buses.all().find((b) => b.key === endpointKey(ep));
  }
}
