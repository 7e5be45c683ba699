// A brand model's wait after a client connects (hw-sim/faults.ts): requests within it go
// unanswered, as a device still waking its Modbus server; defaults per the brand's sources
// (Huawei 800 ms, within the 1 s huawei-solar-lib waits after connecting), none on an RTU line. The
// clock is the test's.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { DeviceSlot } from "../../hw-sim/faults.js";

function slotOf(model: string, extra: Record<string, unknown> = {}) {
  let now = 1_000_000;
  const site = new SiteModel(
    { base_load_w: 1000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => now,
  );
  const spec = deviceSchema.parse({ unit: 1, name: "dev", model, ...extra }) as BrandSpec;
  const [dev] = buildBrandDevices(spec, site);
  const slot = new DeviceSlot(dev!, () => now);
  return { slot, at: (ms: number) => (now = 1_000_000 + ms), t: (ms: number) => 1_000_000 + ms };
}

/** A read of one holding register. */
const read = (address: number) => Buffer.from([3, address >> 8, address & 0xff, 0, 1]);

test("huawei-sun2000 answers nothing within 800 ms of a connect, then answers; on an RTU line (no connect) at once", () => {
  const { slot, at, t } = slotOf("huawei-sun2000");
  assert.equal(slot.device.connectDelayMs, 800, "within the sources' 1 s wait");
  assert.equal(slot.decide(read(30070)).kind, "reply", "no connection: an RTU line");
  const first = t(0); // a connection accepted now
  at(500);
  assert.equal(slot.decide(read(30070), first).kind, "silent", "half a second after the connect");
  at(799);
  assert.equal(slot.decide(read(30070), first).kind, "silent");
  at(800);
  const d = slot.decide(read(30070), first);
  assert.equal(d.kind, "reply");
  assert.deepEqual(d.kind === "reply" ? [...d.pdu] : [], [3, 2, 428 >> 8, 428 & 0xff], "model ID 428");
  const second = t(800); // another client connects: its own wait, the first's connection answered
  assert.equal(slot.decide(read(30070), second).kind, "silent");
  assert.equal(slot.decide(read(30070), first).kind, "reply");
});

test("the wait is per model: a scenario sets it, a brand whose sources ask for none answers at once", () => {
  const none = slotOf("huawei-sun2000", { connect_delay_ms: 0 });
  assert.equal(none.slot.decide(read(30070), none.t(0)).kind, "reply");
  const longer = slotOf("huawei-sun2000", { connect_delay_ms: 5000 });
  longer.at(4000);
  assert.equal(longer.slot.decide(read(30070), longer.t(0)).kind, "silent");
  longer.at(5000);
  assert.equal(longer.slot.decide(read(30070), longer.t(0)).kind, "reply");
  const sungrow = slotOf("sungrow-sh");
  assert.equal(sungrow.slot.device.connectDelayMs, 0);
  assert.equal(sungrow.slot.decide(Buffer.from([4, 0x13, 0x87, 0, 1]), sungrow.t(0)).kind, "reply");
  assert.throws(() => deviceSchema.parse({ unit: 1, name: "dev", model: "huawei-sun2000", connect_delay_ms: -1 }));
});
