// The JSON the status page polls: every view is read from the running parts (poller,
// buses, dispatch, uplink), never from the partner-facing API.
import type { GuessLimits } from "../api/guess-limit.js";
import type { ConnectionLimits } from "../api/connection-limits.js";
import type { Config } from "../config/schema.js";
import type { Db } from "../storage/db.js";
import type { BusManager } from "../modbus/bus.js";
import type { DeviceDescriptor, DeviceHealth, RegisteredDevice } from "../devices/types.js";
import type { LocalDevice } from "../devices/local.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import type { EventRow } from "../dispatch/store.js";
import { eventView, type EventView } from "../dispatch/view.js";
import type { LaneStats } from "../uplink/uplink.js";
import type { SampleStoreStats } from "../telemetry/sample-store.js";
import type { Metrics } from "../telemetry/types.js";
import type { Logger } from "../log.js";
import type { MinuteHistory } from "./history.js";
import { byCodeUnit } from "../util/compare.js";
import { gridMeter } from "../devices/grid-meter.js";
import { OP_MODE_NAMES, wireLabel } from "../model/roles.js";

/** device_op_mode in words, as device sync's description gives them. */
const OP_MODE_WORDS: Record<(typeof OP_MODE_NAMES)[number], string> = {
  unknown: "unknown",
  automatic: "local automatic",
  remote: "remote dispatch",
  standby: "standby",
  fault: "fault",
};

export function opModeName(code: number): string {
  const name = OP_MODE_NAMES[code];
  return name ? OP_MODE_WORDS[name] : `op mode ${code}`;
}

export interface UiDeps {
  config: Config;
  log: Logger;
  registry: { list(): RegisteredDevice[] };
  /** Devices on other transports (Zigbee, GPIO), listed after the Modbus ones. */
  local?: { list(): LocalDevice[] };
  poller: { health(id: string): DeviceHealth | undefined; latest(id: string): Metrics | undefined };
  buses: BusManager;
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
  const devs = d.registry.list();
  const latest = (id: string) => (d.poller.health(id)?.online ? d.poller.latest(id) : undefined);
  let pv: number | null = null;
  let battery: number | null = null;
  const socs: number[] = [];
  for (const dev of devs) {
    const m = latest(dev.config.device_id);
    if (!m) continue;
    const role = dev.descriptor?.role;
    if (role === "pv" && m.power_w !== undefined) pv = (pv ?? 0) + m.power_w;
    if (role === "battery") {
      if (m.power_w !== undefined) battery = (battery ?? 0) + m.power_w;
      if (m.soc_pct !== undefined) socs.push(m.soc_pct);
    }
  }
  const meter = gridMeter(devs, (dev) => ({
    device_id: dev.config.device_id,
    role: dev.descriptor?.role ?? "unknown",
    fully_configured: dev.fully_configured,
    online: d.poller.health(dev.config.device_id)?.online ?? false,
    power_w: d.poller.latest(dev.config.device_id)?.power_w,
  }));
  const grid = meter ? (latest(meter.config.device_id)?.power_w ?? null) : null;
  const load = grid === null && pv === null && battery === null ? null : (grid ?? 0) + (pv ?? 0) + (battery ?? 0);
  const online = devs.filter((x) => d.poller.health(x.config.device_id)?.online).length;
  return {
    ts: new Date().toISOString(),
    site_id: d.config.site_id,
    pv_w: pv,
    battery_w: battery,
    soc_pct: socs.length ? Math.round((socs.reduce((a, b) => a + b, 0) / socs.length) * 10) / 10 : null,
    grid_w: grid,
    grid_meter: meter?.config.device_id ?? null,
    load_w: load,
    devices: { configured: devs.length, online },
  };
}

export function devices(d: UiDeps) {
  return [...modbusDevices(d), ...localDevices(d)].sort((a, b) => byCodeUnit(a.device_id, b.device_id));
}

function localDevices(d: UiDeps) {
  return (d.local?.list() ?? []).map((dev) => {
    const descriptor = dev.descriptor();
    const name = dev.device_name ?? dev.device_id;
    return deviceRow(d, dev.device_id, {
      name,
      integration: descriptor.profile,
      address: dev.address(),
      fully_configured: true,
      descriptor,
      updated_at: null,
    });
  });
}

function modbusDevices(d: UiDeps) {
  return d.registry
    .list()
    .slice()
    .sort((a, b) => byCodeUnit(a.config.device_id, b.config.device_id))
    .map((dev) => {
      const c = dev.config as Record<string, unknown>;
      return deviceRow(d, dev.config.device_id, {
        name: (c.device_name as string | undefined) ?? dev.config.device_id,
        integration: c.device_integration,
        address:
          c.mb_type === 2 ? `tcp://${c.mb_ip}:${c.mb_port} unit ${c.mb_slave_id ?? 1}` : `RTU port ${c.mb_rtu_no} unit ${c.mb_slave_id}`,
        fully_configured: dev.fully_configured,
        descriptor: dev.descriptor,
        updated_at: dev.updated_at,
      });
    });
}

/** One row of the device table: where the device is and what it is, then how the poller last found it. */
function deviceRow(
  d: UiDeps,
  id: string,
  row: {
    name: string;
    integration: unknown;
    address: string;
    fully_configured: boolean;
    descriptor: DeviceDescriptor | null;
    updated_at: string | null;
  },
) {
  const h = d.poller.health(id);
  const desc = row.descriptor;
  return {
    device_id: id,
    name: row.name,
    integration: row.integration,
    address: row.address,
    fully_configured: row.fully_configured,
    device_type: desc?.device_type ?? null,
    type_name: wireLabel(desc?.device_type),
    max_power_w: desc?.max_power_w ?? null,
    identity: desc?.identity ?? {},
    online: h?.online ?? false,
    op_mode: h?.op_mode ?? 0,
    op_mode_name: opModeName(h?.op_mode ?? 0),
    last_ok_at: h?.last_ok_at ?? null,
    last_error: h?.last_error ?? null,
    consecutive_failures: h?.consecutive_failures ?? 0,
    metrics: d.poller.latest(id) ?? {},
    updated_at: row.updated_at,
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
      while (s.length > 2 && now - s[1].at >= BUS_WINDOW_MS) s.shift();
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

/** The latest events, as `sitegate events` and the fleet's `events` command show them. */
export function events(d: UiDeps): EventView[] {
  return d.dispatch.list(200).map(eventView);
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
