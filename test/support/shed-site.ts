// A tiny site model on the injected clock for shed tests: it stands for the meter
// (import = base load + loads that are on - PV - battery discharge), runs one poll a second,
// and holds a reported delivery to the truth (B4: within 10 % or 0.2 kW).
import assert from "node:assert/strict";
import type { ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import type { DispatchRequest } from "../../src/dispatch/request.js";
import { POLL, T0, drRequest, type UnitRig } from "./dispatch-unit.js";
import type { FakeSpec } from "./fake-devices.js";

export const flush = () => new Promise((r) => setImmediate(r));

export type Dev = { device_id: string; status: string; requested_w: number; delivered_w: number; error?: string };
export const devs = (b: ExecutionResponse) => b.details.devices as Dev[];
export const resp = (r: UnitRig, id: string) => r.responses.find((x) => x.event_id === id)!;
export const at = (ms: number) => new Date(T0 + ms).toISOString();

export function req(events: Array<Partial<Record<string, unknown>>>): DispatchRequest {
  return drRequest(events, { event_type: "shed", event_quantity: 1 });
}

/** The site: base load, relay and plug loads (W when on), PV available, batteries; the meter reads import. */
export interface Site {
  base: number;
  loads: Record<string, number>;
  pv?: Record<string, number>;
  batteries?: string[];
  thermostats?: Record<string, number>;
  meter: boolean;
  /** Devices that report their own power (metered plugs). */
  metered?: string[];
}

export function model(r: UnitRig, s: Site) {
  const on = (id: string) => r.dev.coils(id).some(Boolean);
  const pvW = (id: string) => {
    const avail = s.pv![id];
    const max = r.dev.list.find((d) => d.device_id === id)!.max_power_w!;
    return r.dev.reg(id, "holding", 200) === 1 ? Math.min(avail, (r.dev.reg(id, "holding", 201) / 100) * max) : avail;
  };
  const batW = (id: string) => (r.dev.reg(id, "holding", 100) === 2 ? 3000 : 0);
  const heating = (id: string) => r.dev.reg(id, "holding", 0) >= 210;
  const loadW = (id: string) => (on(id) ? s.loads[id] : 0);
  return {
    loadW,
    heating,
    grid(): number {
      let g = s.base;
      for (const id of Object.keys(s.loads)) g += loadW(id);
      for (const [id, w] of Object.entries(s.thermostats ?? {})) g += heating(id) ? w : 0;
      for (const id of Object.keys(s.pv ?? {})) g -= pvW(id);
      for (const id of s.batteries ?? []) g -= batW(id);
      return g;
    },
    metrics(): Record<string, Record<string, number>> {
      const m: Record<string, Record<string, number>> = {};
      if (s.meter) m.grid = { power_w: this.grid() };
      for (const id of Object.keys(s.loads)) m[id] = (s.metered ?? []).includes(id) ? { power_w: loadW(id) } : {};
      for (const id of Object.keys(s.pv ?? {})) m[id] = { power_w: pvW(id) };
      for (const id of s.batteries ?? []) m[id] = { power_w: batW(id) };
      for (const id of Object.keys(s.thermostats ?? {})) m[id] = {};
      return m;
    },
  };
}

/**
 * One poll a second until `until`. `truth` gets, at each poll inside [from, to), the true
 * drop of the loads named (their load before the event less their load now).
 */
export async function run(
  r: UnitRig,
  m: ReturnType<typeof model>,
  until: number,
  watch?: { from: number; to: number; before: number; drop: () => number; samples: number[]; maxGrid?: number[] },
): Promise<void> {
  while (r.clock.now() < until) {
    r.clock.advance(POLL);
    const now = r.clock.now();
    const metrics = m.metrics();
    for (const [id, v] of Object.entries(metrics)) Object.assign(r.dev.list.find((d) => d.device_id === id)!.metrics, v);
    if (watch && now > watch.from && now <= watch.to) {
      watch.samples.push(watch.drop());
      watch.maxGrid?.push(m.grid());
    }
    r.d.observe({ ts: now, devices: Object.entries(metrics).map(([device_id, metrics]) => ({ device_id, metrics })) });
    await flush();
  }
}

export const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/** B4: the reported delivery within 10 % or 0.2 kW of the truth. */
export function assertTruth(b: ExecutionResponse, truthW: number): void {
  const got = (b.details.delivered_quantity as number) * 1000;
  assert.ok(
    Math.abs(got - truthW) <= Math.max(200, 0.1 * truthW),
    `reported ${got} W, the site saw ${truthW} W: ${JSON.stringify(b.details)}`,
  );
}

export function thermostat(id: string, extra: Partial<FakeSpec> = {}): FakeSpec {
  return {
    device_id: id,
    role: "thermostat",
    fully_configured: true,
    online: true,
    metrics: {},
    ...extra,
  };
}

/** A thermostat as a register map: holding 0 is the heating setpoint in 0.1 degC; a shed sets it back 2 degC. */
export function withThermostat(r: UnitRig, id: string): void {
  r.dev.regs.set(id, new Map([["holding:0", 210]]));
  const plan = r.dev.plan.bind(r.dev);
  r.dev.plan = async (dev, action, params) =>
    dev === id ? [{ table: "holding", address: 0, words: [action === "shed" ? 190 : 210], coils: [] }] : plan(dev, action, params);
}
