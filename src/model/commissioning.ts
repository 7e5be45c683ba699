// Commissioning: finding devices on a port and reading one of them before it is configured,
// as the status page offers it. The page runs the jobs (one at a time, progress, a time
// cap) against this interface; a transport family implements it (Modbus: modbus/device/commission.ts)
// and the composition root hands it over, so the page never reaches a bus itself.
// Everything in and out is plain data: the page's form fields in, JSON-ready answers out.
import { SitegateError } from "../errors.js";
import type { Metrics } from "./device.js";

/** Thrown for bad input by the checks below; `message` is one sentence for a person. */
export class ProbeInputError extends SitegateError {
  constructor(message: string) {
    super("INVALID_REQUEST", message);
  }
}

/** The form of a scan as the page sends it (checked by `checkScan`). */
export interface ScanInput {
  endpoint?: unknown;
  from?: unknown;
  to?: unknown;
  timeout_ms?: unknown;
}

/** The form of a one-device read as the page sends it (checked by `checkRead`). */
export interface ReadInput {
  endpoint?: unknown;
  unit?: unknown;
  profile?: unknown;
}

/** A checked scan: which addresses of which port, and how long each probe waits. */
export interface ScanPlan {
  /** The port as the installer wrote it (trimmed). */
  endpoint: string;
  from: number;
  to: number;
  timeoutMs: number;
  /** The daemon already polls this port: the scan shares its link (and probes wait less). */
  shared: boolean;
}

export interface ReadPlan {
  endpoint: string;
  unit: number;
  profile: string;
}

/** An address that answered a probe, and how. */
export interface ScanHit {
  unit: number;
  answer: string;
  /** What it is in an installer's words, once identified ("unit 1: SunSpec inverter (profile sunspec)"). */
  words?: string;
}

export interface ScanProgress {
  probed: number;
  total: number;
  found: ScanHit[];
}

/** What a one-device read found: its identity, every metric, and the names of metric values. */
export interface ReadResult {
  device: Record<string, string | number>;
  metrics: Metrics;
  /** The names of values, where they have one: the device type's, and the profile's of metric values (a state's name). */
  labels: Record<string, string>;
  /** Points the device does not have (exception 2, or silent while the rest answered): no value, not an error. */
  unavailable: string[];
}

/** A port opened for one job: the daemon's own link to it, or one of its own that `close` ends. */
export interface CommissioningLink {
  /** Probes each address of the plan in turn; stops early when `signal` aborts. */
  scan(plan: ScanPlan, onProgress: (p: ScanProgress) => void, signal: AbortSignal): Promise<ScanHit[]>;
  /** Names the profiles whose identity the device at `unit` matches, the specific ones first. */
  identify(unit: number, timeoutMs: number): Promise<string[]>;
  /** A unit found, in an installer's words, after `identify` (what it matched); absent: "unit N: answers". */
  describe?(hit: ScanHit): string;
  /** Pairs the device with the plan's profile and reads every metric; throws naming what failed. */
  read(plan: ReadPlan): Promise<ReadResult>;
  close(): Promise<void>;
}

export interface Commissioning {
  /** Checks a scan form; throws ProbeInputError naming what is wrong. */
  checkScan(input: ScanInput): ScanPlan;
  /** Checks a read form; throws ProbeInputError naming what is wrong. */
  checkRead(input: ReadInput): ReadPlan;
  /** Opens the port of a checked plan (never throws: a port that cannot be reached fails the first probe). */
  open(endpoint: string): CommissioningLink;
}
