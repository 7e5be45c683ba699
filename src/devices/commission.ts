// Commissioning probes shared by `sitegate scan` / `sitegate read` and the status page:
// input checks with one-sentence messages, a unit-id scan with progress, and a one-device
// read (pair, then every metric). The caller owns the bus (a fresh one, or the daemon's).
import { SitegateError, errorMessage, isSitegateError } from "../errors.js";
import { PRIORITY, type Bus } from "../modbus/bus.js";
import { parseEndpoint, type Endpoint } from "../modbus/endpoint.js";
import { DeviceDriver } from "./driver.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import type { Metrics } from "./types.js";

export interface ScanRange {
  from: number;
  to: number;
  timeoutMs: number;
}

export interface ScanHit {
  unit: number;
  answer: string;
}

export interface ScanProgress {
  probed: number;
  total: number;
  found: ScanHit[];
}

/** Thrown for bad input; `message` is one sentence for a person. */
export class ProbeInputError extends SitegateError {
  constructor(message: string) {
    super("INVALID_REQUEST", message);
  }
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
      if (isSitegateError(e, "MODBUS_EXCEPTION")) {
        const code = Number(e.details[0]?.message);
        if (code !== 10 && code !== 11) found.push({ unit, answer: `exception ${code}` });
      } else if (isSitegateError(e, "MODBUS_DISCONNECTED") && unit === range.from) {
        throw e;
      }
    }
    onProgress?.({ probed: unit - range.from + 1, total, found });
  }
  return found;
}

export interface ReadResult {
  device: Record<string, string | number>;
  metrics: Metrics;
  /** The profile's names of metric values (a state's name), where it names them. */
  labels: Record<string, string>;
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
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(metrics)) {
    const name = driver.label(k, v);
    if (name !== undefined) labels[k] = name;
  }
  return { device, metrics, labels };
}
