// The JSON the status page polls: every view is read from the running parts (the device
// directory, the buses' figures, dispatch, uplink), never from the partner-facing API. A
// device is read through the one device model (model/device.ts), whatever its family.
import type { GuessLimits } from "../api/guess-limit.js";
import type { ConnectionLimits } from "../api/connection-limits.js";
import type { Config } from "../config/schema.js";
import type { Db } from "../storage/db.js";
import type { Device, DeviceDirectory } from "../model/device.js";
import type { Commissioning } from "../model/commissioning.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import type { EventRow } from "../dispatch/store.js";
import { eventView, type EventView } from "../dispatch/view.js";
import type { LaneStats } from "../uplink/uplink.js";
import type { SampleStoreStats } from "../telemetry/sample-store.js";
import type { Logger } from "../log.js";
import type { MinuteHistory } from "./history.js";
import { byCodeUnit } from "../util/compare.js";
import { gridMeter } from "../devices/grid-meter.js";
import { opModeWords, wireLabel } from "../model/roles.js";
import { valueNames } from "../profiles/value-names.js";

/** A shared link the devices are polled over (a Modbus bus), as the Buses page shows it. */
export interface BusLink {
  readonly key: string;
  readonly endpoint: { readonly kind: string };
  readonly queued: number;
  readonly stats: { busy_ms: number; requests: number; failures: number; timeouts: number; reconnects: number };
}

export interface UiDeps {
  config: Config;
  log: Logger;
  /** Every device of the site, whatever its family. */
  devices: DeviceDirectory;
  buses: { all(): readonly BusLink[] };
  /** Scans and one-device reads of the commissioning page. */
  commissioning: Commissioning;
  profiles: ProfileRegistry;
  dispatch: { list(limit?: number): EventRow[] };
  uplink: { stats(): Record<string, LaneStats>; backlog(): { depth: number; oldest_at: string | null } };
  samples: { stats(): SampleStoreStats };
  db: () => Db;
  history: MinuteHistory;
  /** The username locks, shared with the token endpoint. */
  guesses: GuessLimits;
  /** Tests shorten the timeouts of the page's own listener; the daemon keeps CONNECTION_LIMITS. */
  connectionLimits?: Partial<ConnectionLimits>;
}

/** Power flow: PV and battery (+ = delivering), grid (+ = import), load = grid + pv + battery. */
export function overview(d: UiDeps) {
  const devs = d.devices.list();
  const latest = (dev: Device) => (dev.health().online ? dev.latest() : undefined);
  let pv: number | null = null;
  let battery: number | null = null;
  const socs: number[] = [];
  for (const dev of devs) {
    const m = latest(dev);
    if (!m) continue;
    const role = dev.descriptor()?.role;
    if (role === "pv" && m.power_w !== undefined) pv = (pv ?? 0) + m.power_w;
    if (role === "battery") {
      if (m.power_w !== undefined) battery = (battery ?? 0) + m.power_w;
      if (m.soc_pct !== undefined) socs.push(m.soc_pct);
    }
  }
  const meter = gridMeter(devs, (dev) => ({
    device_id: dev.id,
    role: dev.descriptor()?.role ?? "unknown",
    fully_configured: dev.info().fully_configured,
    online: dev.health().online,
    power_w: dev.latest().power_w,
  }));
  const grid = meter ? (latest(meter)?.power_w ?? null) : null;
  const load = grid === null && pv === null && battery === null ? null : (grid ?? 0) + (pv ?? 0) + (battery ?? 0);
  const online = devs.filter((x) => x.health().online).length;
  return {
    ts: new Date().toISOString(),
    site_id: d.config.site_id,
    pv_w: pv,
    battery_w: battery,
    soc_pct: socs.length ? Math.round((socs.reduce((a, b) => a + b, 0) / socs.length) * 10) / 10 : null,
    grid_w: grid,
    grid_meter: meter?.id ?? null,
    load_w: load,
    devices: { configured: devs.length, online },
  };
}

/** The device table, by device_id: where each device is and what it is, then how it was last found. */
export function devices(d: UiDeps) {
  return d.devices
    .list()
    .map((dev) => deviceRow(d, dev))
    .sort((a, b) => byCodeUnit(a.device_id, b.device_id));
}

function deviceRow(d: UiDeps, dev: Device) {
  const info = dev.info();
  const h = dev.health();
  const desc = dev.descriptor();
  const metrics = dev.latest();
  const profile = desc?.profile !== undefined && d.profiles.has(desc.profile) ? d.profiles.get(desc.profile) : undefined;
  return {
    device_id: dev.id,
    name: info.device_name ?? dev.id,
    family: info.family,
    profile: desc?.profile ?? null,
    address: info.address,
    fully_configured: info.fully_configured,
    device_type: desc?.device_type ?? null,
    type_name: wireLabel(desc?.device_type),
    max_power_w: desc?.max_power_w ?? null,
    identity: desc?.identity ?? {},
    online: h.online,
    op_mode: h.op_mode,
    op_mode_name: opModeWords(h.op_mode),
    last_ok_at: h.last_ok_at,
    last_error: h.last_error,
    consecutive_failures: h.consecutive_failures,
    unavailable_points: h.unavailable_points ?? [],
    metrics,
    /** The readings that have names (a state, a relay's coils), in the words the terminal prints. */
    value_names: valueNames(profile, metrics),
  };
}

/** How far back the Buses page's utilisation looks. */
export const BUS_WINDOW_MS = 60_000;
const BUS_SAMPLE_MS = 1000;

/**
 * Bus utilisation: busy time over wall time across the last BUS_WINDOW_MS. A sampler
 * takes each bus's busy time every second from the start, so the first look already has
 * a figure (a bus younger than one sample shows its busy time since it was first seen).
 */
export class BusView {
  private readonly samples = new Map<string, Array<{ at: number; busy: number }>>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly d: UiDeps,
    private readonly now: () => number = () => performance.now(),
  ) {}

  start(): void {
    this.sample();
    this.timer ??= setInterval(() => this.sample(), BUS_SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Records each bus's busy time now; drops samples older than the window, and buses gone. */
  sample(): void {
    const now = this.now();
    const seen = new Set<string>();
    for (const b of this.d.buses.all()) {
      seen.add(b.key);
      const s = this.samples.get(b.key) ?? [];
      s.push({ at: now, busy: b.stats.busy_ms });
      while (s.length > 2 && now - s[1]!.at >= BUS_WINDOW_MS) s.shift(); // s[1] is there: the length was checked
      this.samples.set(b.key, s);
    }
    for (const k of this.samples.keys()) if (!seen.has(k)) this.samples.delete(k);
  }

  private utilisation(key: string, busyMs: number, now: number): number | null {
    const first = this.samples.get(key)?.[0];
    if (!first || now - first.at < 100) return null; // too short a span to mean anything
    return Math.min(1, Math.max(0, (busyMs - first.busy) / (now - first.at)));
  }

  list() {
    const now = this.now();
    return this.d.buses.all().map((b) => {
      const util = this.utilisation(b.key, b.stats.busy_ms, now);
      return {
        bus: b.key,
        kind: b.endpoint.kind,
        utilisation: util,
        queued: b.queued,
        requests: b.stats.requests,
        failures: b.stats.failures,
        timeouts: b.stats.timeouts,
        reconnects: b.stats.reconnects,
      };
    });
  }
}

/** The latest events, as `sitegate events` and the fleet's `events` command show them, with when and why each ended. */
export function events(d: UiDeps): Array<EventView & { ended_at: string | null; end_reason: string | null }> {
  return d.dispatch.list(200).map((r) => ({
    ...eventView(r),
    ended_at: r.ended_at === null ? null : new Date(r.ended_at).toISOString(),
    end_reason: endReason(r),
  }));
}

/**
 * Why an event is over, in words: "completed" (it ran its window), "ended by restore
 * 1a2b3c4d" (a restore ended a running shed), "cancelled" (with what ended it, a local input
 * released), "missed: the gateway was down". Null while it is scheduled or running.
 */
export function endReason(r: Pick<EventRow, "state" | "receipt" | "progress">): string | null {
  const by = r.progress.ended_by;
  if (r.state === "scheduled" || r.state === "running") return null;
  if (r.state === "missed") return "missed: the gateway was down";
  if (r.state === "cancelled" || r.receipt === "cancelled") return by ? `cancelled (${by})` : "cancelled";
  const restore = /^ended by restore (\S+)$/.exec(by ?? "");
  if (restore) return `ended by restore ${restore[1]!.slice(0, 8)}`;
  return by ?? "completed";
}

export class UplinkView {
  constructor(private readonly d: UiDeps) {}

  get() {
    const o = this.d.uplink.backlog();
    const st = this.d.samples.stats();
    return {
      outbox: {
        depth: o.depth,
        oldest_at: o.oldest_at,
        age_s: o.oldest_at ? Math.max(0, Math.round((Date.now() - Date.parse(o.oldest_at)) / 1000)) : null,
      },
      data_push: { pending_snapshots: st.pending_snapshots, buffer_bytes: st.bytes, dropped_samples: st.dropped_samples },
      lanes: Object.entries(this.d.uplink.stats()).map(([lane, l]) => ({
        lane,
        sent: l.sent,
        failures: l.failures,
        attempt: l.attempt,
        last_sent_at: l.last_sent_at,
        last_error: l.last_error,
      })),
    };
  }
}
