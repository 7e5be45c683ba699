// The simulator's site physics on a controlled clock: state of charge, its bounds, the
// revert timeout, curtailment, the meter's sum, determinism with the seed, and the site
// clock itself (start_time, timezone).
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel, scenarioClock } from "../../hw-sim/site-model.js";
import { parseScenario } from "../../hw-sim/scenario.js";
import { PvInverter, StorageInverter, SunSpecMeter } from "../../hw-sim/models/sunspec-devices.js";
import { Relay } from "../../hw-sim/models/relay.js";
import { handlePdu } from "../../hw-sim/modbus-pdu.js";
import { M124 } from "../support/site.js";

function site(seed = 7, irradiance = 0.5) {
  let now = Date.UTC(2026, 5, 1, 12);
  const s = new SiteModel(
    { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: irradiance, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    seed,
    () => now,
  );
  return {
    s,
    advance: (ms: number) => {
      now += ms;
      s.advance();
    },
  };
}

const write = (dev: StorageInverter, address: number, value: number) => {
  const pdu = Buffer.alloc(5);
  pdu[0] = 6;
  pdu.writeUInt16BE(address, 1);
  pdu.writeUInt16BE(value & 0xffff, 3);
  const r = handlePdu(dev, pdu, () => {});
  assert.equal(r[0], 6, `write ${address}=${value} answered exception ${r[1]}`);
};

test("a discharging battery loses charge at its power over its capacity, and stops when empty", () => {
  const { s, advance } = site();
  const bat = new StorageInverter({ name: "b", unit: 1, max_power_w: 5000, capacity_wh: 10000, soc_pct: 10 }, s);
  write(bat, M124 + 12, 50); // OutWRte 50 %
  write(bat, M124 + 5, 2); // discharge
  assert.equal(bat.acPowerW(), 2500);
  advance(3600_000 / 10); // 6 min at 2.5 kW = 250 Wh = 2.5 %
  assert.ok(Math.abs(bat.soc - 7.5) < 0.01, `soc ${bat.soc}`);
  advance(3600_000); // far past empty
  assert.equal(bat.soc, 0);
  assert.equal(bat.acPowerW(), 0, "an empty battery discharges no more");
});

test("a full battery charges no more; the revert timeout returns it to idle", () => {
  const { s, advance } = site();
  const bat = new StorageInverter({ name: "b", unit: 1, max_power_w: 5000, capacity_wh: 10000, soc_pct: 99.9 }, s);
  write(bat, M124 + 15, 30); // InOutWRte_RvrtTms 30 s
  write(bat, M124 + 13, 100); // InWRte 100 %
  write(bat, M124 + 5, 1); // charge
  assert.equal(bat.acPowerW(), -5000);
  advance(10_000);
  assert.equal(bat.soc, 100);
  assert.equal(bat.acPowerW(), 0, "full: no more charge");
  assert.equal(bat.commandedW(), -5000, "the command stands until it reverts");
  advance(25_000);
  assert.equal(bat.ctl, 0, "reverted after 30 s without a rewrite");
});

test("out-of-range control values are refused with exception 3 and change nothing", () => {
  const { s } = site();
  const bat = new StorageInverter({ name: "b", unit: 1, max_power_w: 5000, capacity_wh: 10000, soc_pct: 50 }, s);
  const pdu = Buffer.from([6, 0, 0, 0, 9]);
  pdu.writeUInt16BE(M124 + 5, 1);
  assert.deepEqual([...handlePdu(bat, pdu, () => {})], [0x86, 3]);
  assert.equal(bat.ctl, 0);
});

test("curtailment caps PV; the meter reads load + relays - PV - battery, import positive", () => {
  const { s } = site(7, 0.8);
  const pv = new PvInverter({ name: "pv", unit: 2, max_power_w: 6000 }, s);
  const meter = new SunSpecMeter({ name: "m", unit: 3 }, s);
  const relay = new Relay({ name: "r", unit: 4, coils: 4, load_per_coil_w: 500 }, s);
  const avail = pv.availableW();
  assert.ok(Math.abs(avail - 4800) <= 48);
  assert.ok(Math.abs(meter.view().power_w - (2000 + 2000 - avail)) < 1);
  pv.ctl123.limPct = 25;
  pv.ctl123.limEna = 1;
  assert.equal(pv.acPowerW(), 1500);
  relay.writeCoils(0, [false, false, false, false]);
  assert.ok(Math.abs(meter.view().power_w - (2000 - 1500)) < 1);
});

test("the same seed gives the same site; another seed another one", () => {
  const serial = (seed: number) => {
    const { s } = site(seed);
    const b = new StorageInverter({ name: "battery", unit: 1, max_power_w: 5000, capacity_wh: 10000, soc_pct: 50 }, s);
    return b.readHolding(40052, 16).join(",");
  };
  assert.equal(serial(7), serial(7));
  assert.notEqual(serial(7), serial(8));
  const noisy = (seed: number) => {
    let now = Date.UTC(2026, 5, 1, 12);
    const s = new SiteModel({ base_load_w: 2000, load_noise_pct: 10, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 }, seed, () => now);
    return Array.from({ length: 5 }, () => ((now += 1000), s.baseLoadW()));
  };
  assert.deepEqual(noisy(3), noisy(3));
  assert.notDeepEqual(noisy(3), noisy(4));
});

test("the daylight curve peaks at solar noon of the site's longitude, not at 12:00 UTC", () => {
  const at = (h: number, m = 0) => Date.UTC(2026, 10, 25, h) + m * 60_000;
  const curve = (lon: number, t: number) =>
    new SiteModel(
      { base_load_w: 0, load_noise_pct: 0, longitude_deg: lon, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
      1,
      () => t,
    ).irradiance();
  // Berlin, 13.4 degrees east: solar noon is 12:00 - 13.4/15 h = 11:06:24 UTC.
  assert.ok(Math.abs(curve(13.4, at(11, 6.4)) - 1) < 1e-9);
  assert.ok(curve(13.4, at(11, 6.4)) > curve(13.4, at(12)));
  // 16:30 UTC is 17:24 solar time in Berlin: a low sun.
  assert.ok(curve(13.4, at(16, 30)) > 0 && curve(13.4, at(16, 30)) < 0.2);
  // Sydney, 151.2 east: its noon is 01:55 UTC, when UTC noon sees the sun nowhere near.
  assert.ok(curve(151.2, at(1, 55)) > 0.99);
  assert.equal(curve(151.2, at(12)), 0);
  // New York, 74 west: dark at 10:00 UTC (05:04 solar), up at 17:00 UTC (12:04 solar).
  assert.equal(curve(-74, at(10)), 0);
  assert.ok(curve(-74, at(17)) > 0.99);
  // Without a longitude the old rule stands: UTC + tz_offset_h.
  const utc = new SiteModel({ base_load_w: 0, load_noise_pct: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 }, 1, () => at(12));
  assert.equal(utc.irradiance(), 1);
});

test("the site clock: start_time starts it at that instant and it moves at the machine's pace; timezone sets its local time", () => {
  let wall = Date.UTC(2031, 0, 1, 0, 0); // the machine's clock, far from the site's
  const clock = scenarioClock({ start_time: "2026-11-28T08:37:00Z" }, () => wall);
  assert.equal(clock(), Date.UTC(2026, 10, 28, 8, 37));
  wall += 90_000;
  assert.equal(clock(), Date.UTC(2026, 10, 28, 8, 38, 30));
  assert.equal(scenarioClock({}, () => wall)(), wall, "no start_time: the machine's clock");

  const spec = { base_load_w: 0, load_noise_pct: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 };
  const at = (site: Partial<typeof spec> & { timezone?: string }, t: number) =>
    new SiteModel({ ...spec, ...site }, 1, () => t).localMinutes();
  const t = Date.UTC(2026, 10, 28, 8, 37);
  assert.equal(at({}, t), 8 * 60 + 37, "no zone: UTC");
  assert.equal(at({ tz_offset_h: 2 }, t), 10 * 60 + 37, "no zone: UTC + tz_offset_h");
  assert.equal(at({ timezone: "Europe/Berlin" }, t), 9 * 60 + 37, "winter time in Berlin");
  assert.equal(at({ timezone: "Europe/Berlin" }, Date.UTC(2026, 5, 21, 8, 37)), 10 * 60 + 37, "summer time in Berlin");
  assert.equal(at({ timezone: "Asia/Tokyo" }, t), 17 * 60 + 37);
  assert.equal(at({ timezone: "America/New_York" }, t), 3 * 60 + 37);
  assert.equal(at({ timezone: "America/New_York" }, Date.UTC(2026, 10, 28, 3, 0)), 22 * 60, "the day before");

  // The scenario keys, and a clear error for a bad one.
  const sc = (site: Record<string, unknown>) => ({
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "relay", name: "r" }] }],
    site,
  });
  const ok = parseScenario(sc({ timezone: "Asia/Tokyo", start_time: "2026-11-28T09:30:00+09:00" }));
  assert.deepEqual([ok.site.timezone, ok.site.start_time], ["Asia/Tokyo", "2026-11-28T09:30:00+09:00"]);
  assert.equal(new SiteModel(ok.site, 1).localMinutes(), 9 * 60 + 30, "the scenario's own clock, whatever the machine's time");
  assert.throws(() => parseScenario(sc({ timezone: "Mars/Olympus" })), /site\.timezone: must be an IANA time zone/);
  assert.throws(() => parseScenario(sc({ start_time: "yesterday" })), /site\.start_time: must be an ISO 8601 time/);
});
