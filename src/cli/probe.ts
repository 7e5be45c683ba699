// `sitegate probe`: which of a profile's points a device answers, for an installer at the
// device. The device is paired as the daemon would pair it (identity, relocated blocks,
// SunSpec models); then each point's registers (value, scale factor, direction, minus) are
// read on their own, once, and the point is listed as one of: answers (with its value), not
// available (the device answers its "no value" word, NaN), unavailable (exception 2, or
// silent while other points answer), out of range (a value the point cannot hold), or
// another failure in words. The exit code says whether the role's required points answer.
import { EXIT_FAILURE, EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage, isSitegateError } from "../errors.js";
import { silentLogger } from "../log.js";
import { Bus, PRIORITY } from "../modbus/bus.js";
import { siteProfiles } from "../profiles/registry.js";
import type { Profile } from "../profiles/schema.js";
import { modbusExceptionCode } from "../modbus/device/commission.js";
import { DeviceDriver } from "../modbus/device/driver.js";
import { decodePoints, resolveFixedPoints, tableKey, type Registers, type ResolvedPoint } from "../modbus/device/decode.js";
import { pointRanges, type UnitRange } from "../modbus/device/point-reads.js";
import { isIllegalAddress, isSilent } from "../modbus/device/unavailable.js";
import { DEFAULT_PROFILES_DIR } from "./dump.js";
import { parseEndpoint, parseProfile, parseUnit } from "./read.js";

export type PointState = "answers" | "not_available" | "unavailable" | "out_of_range" | "no_answer" | "error";

/** The states of a point whose registers answered (its value may still be NaN or out of range). */
const ANSWERED: readonly PointState[] = ["answers", "not_available", "out_of_range"];

export interface ProbedPoint {
  metric: string;
  required: boolean;
  state: PointState;
  value?: number;
  /** Why, in an installer's words. */
  detail: string;
  /** Where: "holding 13021" (its value register). */
  register: string;
}

/** How a read of a point's registers went. */
type Outcome = { words: Registers } | { error: unknown; at: UnitRange };

async function readPoint(pt: ResolvedPoint, unit: number, read: (r: UnitRange) => Promise<number[]>): Promise<Outcome> {
  const data: Registers = new Map();
  for (const r of pointRanges(pt)) {
    let words: number[];
    try {
      words = await read(r);
    } catch (e) {
      return { error: e, at: r };
    }
    const key = tableKey(r.unit ?? unit, r.table);
    let t = data.get(key);
    if (!t) data.set(key, (t = new Map()));
    words.forEach((w, i) => t.set(r.address + i, w));
  }
  return { words: data };
}

/**
 * The bounds a reading can hold, where the point or the device says: a percentage 0..100,
 * a frequency 45..65 Hz, a named state one of its profile's names, the device's own power (W,
 * not the grid's) at most twice its rated power. Undefined: no bound known, the value is shown as it is.
 */
export function pointBounds(
  profile: Profile,
  metric: string,
  maxPowerW: number | undefined,
): { ok: (v: number) => boolean; says: string } | undefined {
  const enumName = profile.kind === "fixed" ? profile.points.find((p) => p.metric === metric)?.enum : undefined;
  const names = enumName !== undefined ? profile.enums[enumName] : undefined;
  if (names) {
    const values = Object.values(names);
    return {
      ok: (v) => values.includes(v),
      says: `one of the ${enumName} states ${Object.entries(names)
        .map(([k, v]) => `${v} ${k}`)
        .join(", ")}`,
    };
  }
  if (metric.endsWith("_pct")) return { ok: (v) => v >= 0 && v <= 100, says: "0..100 %" };
  if (metric.endsWith("_hz")) return { ok: (v) => v >= 45 && v <= 65, says: "45..65 Hz" };
  // The device's own power (not the grid's, which the house load drives past any rating).
  if (metric.endsWith("_w") && !metric.startsWith("grid_") && maxPowerW !== undefined && maxPowerW > 0)
    return { ok: (v) => Math.abs(v) <= 2 * maxPowerW, says: `at most ${2 * maxPowerW} W either way (twice the rated ${maxPowerW} W)` };
  return undefined;
}

function where(r: UnitRange, unit: number): string {
  return `${r.table} ${r.address}${r.unit !== undefined && r.unit !== unit ? ` (unit ${r.unit})` : ""}`;
}

/** Classifies one point from its read (answered says whether any other point of the device answered). */
function classify(
  profile: Profile,
  pt: ResolvedPoint,
  unit: number,
  got: Outcome,
  maxPowerW: number | undefined,
): Omit<ProbedPoint, "metric" | "required" | "register"> {
  if ("error" in got) {
    const at = where(got.at, unit);
    if (isIllegalAddress(got.error))
      return { state: "unavailable", detail: `the device has no such register (exception 2, illegal address, at ${at})` };
    if (isSilent(got.error)) return { state: "no_answer", detail: `no answer at ${at}` };
    const code = modbusExceptionCode(got.error);
    return { state: "error", detail: code !== undefined ? `exception ${code} at ${at}` : `${errorMessage(got.error)} (at ${at})` };
  }
  const value = decodePoints([pt], () => true, got.words, unit)[pt.metric];
  if (value === undefined) return { state: "not_available", detail: 'the device answers its "no value" word (NaN / not available)' };
  const bound = pointBounds(profile, pt.metric, maxPowerW);
  if (bound && !bound.ok(value)) return { state: "out_of_range", value, detail: `${value} is outside ${bound.says}` };
  return { state: "answers", value, detail: String(value) };
}

export interface ProbeResult {
  paired: boolean;
  /** Why pairing failed, in words. */
  pairing?: string;
  device_type?: number;
  max_power_w?: number;
  points: ProbedPoint[];
  /** Every point the role requires answered. */
  required_ok: boolean;
}

/** Pairs the device, then reads each of its points apart and says how each answered. */
export async function probeDevice(bus: Bus, unit: number, profile: Profile): Promise<ProbeResult> {
  const driver = new DeviceDriver(bus, unit, profile);
  const read = (r: UnitRange) =>
    bus.read(r.unit ?? unit, r.table, r.address, r.count, { priority: PRIORITY.scan, timeoutMs: profile.timeout_ms, retries: 0 });
  let pairing: string | undefined;
  let points: readonly ResolvedPoint[];
  try {
    await driver.pair(PRIORITY.scan);
    points = driver.resolvedPoints;
  } catch (e) {
    pairing = errorMessage(e);
    // A device that does not answer at all: each point would cost one more timeout to say so.
    if (isSilent(e) || isSitegateError(e, "MODBUS_DISCONNECTED")) return { paired: false, pairing, points: [], required_ok: false };
    // A fixed profile's points are known without pairing: list them, so the installer sees what is missing.
    points = profile.kind === "fixed" ? resolveFixedPoints(profile) : [];
  }
  const maxPowerW = driver.descriptor?.max_power_w;
  const outcomes = [];
  for (const pt of points) {
    // A relocated block whose marker was found at no base: its points are not on this device.
    const moved = driver.unavailable.list().find((u) => u.metric === pt.metric);
    outcomes.push({ pt, got: moved ? undefined : await readPoint(pt, unit, read), moved });
  }
  const anyAnswered = outcomes.some((o) => o.got && !("error" in o.got));
  const probed: ProbedPoint[] = outcomes.map(({ pt, got, moved }) => {
    const head = { metric: pt.metric, required: pt.required === true, register: where(pt, unit) };
    if (!got)
      return {
        ...head,
        state: "unavailable",
        detail: `the device has no such block: its marker is at none of the profile's bases (${moved?.reason ?? "not found"})`,
      };
    const c = classify(profile, pt, unit, got, maxPowerW);
    // Silent while other points answer: the device lacks it (as polling would mark it).
    if (c.state === "no_answer" && anyAnswered)
      return { ...head, state: "unavailable", detail: `${c.detail} while the device's other points answer` };
    return { ...head, ...c };
  });
  const requiredOk = pairing === undefined && probed.every((p) => !p.required || ANSWERED.includes(p.state));
  return {
    paired: pairing === undefined,
    ...(pairing !== undefined ? { pairing } : {}),
    ...(driver.descriptor ? { device_type: driver.descriptor.device_type } : {}),
    ...(maxPowerW !== undefined ? { max_power_w: maxPowerW } : {}),
    points: probed,
    required_ok: requiredOk,
  };
}

const WORDS: Record<PointState, string> = {
  answers: "answers",
  not_available: "not available",
  unavailable: "unavailable",
  out_of_range: "out of range",
  no_answer: "no answer",
  error: "failed",
};

/** The probe as a table an installer reads at the device. */
export function probeText(r: ProbeResult, title: string): string {
  const lines = [title];
  lines.push(
    r.paired
      ? `paired: device_type ${r.device_type}${r.max_power_w !== undefined ? `, rated ${r.max_power_w} W` : ""}`
      : `NOT paired: ${r.pairing}`,
  );
  const w = Math.max(6, ...r.points.map((p) => p.metric.length + (p.required ? 2 : 0)));
  lines.push("", `${"point".padEnd(w)}  ${"state".padEnd(13)}  ${"register".padEnd(16)}  detail`);
  for (const p of r.points)
    lines.push(`${(p.metric + (p.required ? " *" : "")).padEnd(w)}  ${WORDS[p.state].padEnd(13)}  ${p.register.padEnd(16)}  ${p.detail}`);
  lines.push("", "* required by the device's role: without it the gateway does not pair the device");
  const missing = r.points.filter((p) => p.required && !ANSWERED.includes(p.state)).map((p) => p.metric);
  const odd = r.points.filter((p) => p.required && (p.state === "not_available" || p.state === "out_of_range")).map((p) => p.metric);
  lines.push(
    r.required_ok
      ? `result: every required point answers; the gateway can use this device${odd.length ? ` (but ${odd.join(", ")} read no usable value now: see above)` : ""}`
      : `result: the gateway cannot use this device${missing.length ? `: ${missing.join(", ")} ${missing.length === 1 ? "does" : "do"} not answer` : ""}${r.paired ? "" : " (pairing failed)"}`,
  );
  return lines.join("\n") + "\n";
}

const command: Command = {
  summary: "List which of a profile's points a device answers: answers, not available (NaN), unavailable, out of range.",
  usage:
    "sitegate probe --profile NAME ENDPOINT|--endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 [--unit N (1)] [--json] [--profiles-dir DIR]",
  options: {
    endpoint: { type: "string", short: "e" },
    unit: { type: "string", short: "u" },
    profile: { type: "string", short: "p" },
    json: { type: "boolean" },
    "profiles-dir": { type: "string" },
  },
  async run(values, positionals) {
    if (positionals.length > 1) throw new UsageError(`one endpoint, not ${positionals.length}: ${positionals.join(" ")}`);
    const text = typeof values.endpoint === "string" ? values.endpoint : positionals[0];
    if (text === undefined) throw new UsageError("an endpoint is required (tcp://HOST:PORT or rtu:/dev/ttyX?baud=9600)");
    if (typeof values.endpoint === "string" && positionals.length > 0)
      throw new UsageError("give the endpoint once (--endpoint or as an argument)");
    const profiles = siteProfiles(String(values["profiles-dir"] ?? DEFAULT_PROFILES_DIR));
    const profile = parseProfile(values.profile, profiles);
    const unit = parseUnit(values.unit ?? "1");
    const endpoint = parseEndpoint(text);
    const bus = new Bus(endpoint, silentLogger());
    try {
      const r = await probeDevice(bus, unit, profiles.get(profile));
      if (values.json) process.stdout.write(JSON.stringify(r) + "\n");
      else process.stdout.write(probeText(r, `sitegate probe: unit ${unit} at ${text} as ${profile}`));
      return r.required_ok ? EXIT_OK : EXIT_FAILURE;
    } finally {
      await bus.close();
    }
  },
};
export default command;
