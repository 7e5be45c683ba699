// Identification: a profile names what identifies its device (a value, a string prefix, a
// model-code range) and a device that merely answers matches nothing; `identifyUnit` reads
// each profile's identity registers on the unit's own or a sub-device's unit id. And the
// library itself: every built-in device profile identifies its device and its header names
// the manufacturer's document, a second source and the register numbering; every battery
// profile reads what dispatch needs and has charge, discharge and release.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expectationHolds, identifiable, identifyUnit, identityMatches, type IdentityReading } from "../../src/modbus/device/identify.js";
import { BUILTIN_DIR, ProfileRegistry, builtinProfiles } from "../../src/profiles/registry.js";
import { profileSchema, type IdentityRegister } from "../../src/profiles/schema.js";
import { SitegateError } from "../../src/errors.js";
import type { Bus } from "../../src/modbus/bus.js";
import { BRAND_MODELS } from "../../hw-sim/models/brands/index.js";

const reg = (r: Record<string, unknown>): IdentityRegister =>
  (
    profileSchema.parse({ name: "t", kind: "fixed", role: "meter", identity: [r], points: [{ metric: "x", address: 0 }] }) as {
      identity: IdentityRegister[];
    }
  ).identity[0];
const readings = (o: Record<string, number | string | Error>) =>
  new Map<string, IdentityReading>(Object.entries(o).map(([k, v]) => [k, v instanceof Error ? { error: v.message } : { value: v }]));

test("an expectation is a value list, a string prefix or a model-code range; none identifies nothing", () => {
  assert.ok(expectationHolds(reg({ name: "code", address: 0, expect: { values: [32, 137] } }), 137));
  assert.ok(!expectationHolds(reg({ name: "code", address: 0, expect: { values: [32] } }), 33));
  assert.ok(
    expectationHolds(reg({ name: "model", address: 0, type: "string", length: 8, expect: { prefix: ["SUN2000"] } }), "SUN2000-10KTL-M1"),
  );
  assert.ok(!expectationHolds(reg({ name: "model", address: 0, type: "string", length: 8, expect: { prefix: ["SUN2000"] } }), "SUN600"));
  const ranges = reg({
    name: "dtc",
    address: 0,
    expect: {
      ranges: [
        [0xd00, 0xd2f],
        [0xe00, 0xe4f],
      ],
    },
  });
  assert.deepEqual(
    [0xcff, 0xd00, 0xe0e, 0xe4f, 0xe50].map((v) => expectationHolds(ranges, v)),
    [false, true, true, true, false],
  );
  assert.ok(!expectationHolds(reg({ name: "serial", address: 0 }), 1234), "a register without expect identifies nothing");
  const bad = profileSchema.safeParse({
    name: "t",
    kind: "fixed",
    role: "meter",
    identity: [
      { name: "a", address: 0, expect: { values: [1], prefix: ["x"] } },
      { name: "b", address: 1, expect: { prefix: ["x"] } },
    ],
    points: [{ metric: "x", address: 0 }],
  });
  assert.equal(bad.success, false);
  assert.deepEqual(
    [...new Set(bad.error!.issues.map((i) => i.path.join(".")))],
    ["identity.0.expect", "identity.1.expect"],
    "one kind of expectation; a prefix needs a string register",
  );
});

test("a profile matches when it names an expectation and every one holds; answering is not matching", () => {
  const regs = [reg({ name: "serial", address: 0 }), reg({ name: "code", address: 1, expect: { values: [7] } })];
  assert.ok(identityMatches(regs, readings({ serial: 1, code: 7 })));
  assert.ok(!identityMatches(regs, readings({ serial: 1, code: 8 })));
  assert.ok(!identityMatches(regs, readings({ serial: 1, code: new Error("exception 2") })), "an unreadable expectation");
  assert.ok(!identityMatches([reg({ name: "serial", address: 0 })], readings({ serial: 1 })), "no expectation: no match");
  const names = identifiable(
    builtinProfiles()
      .names()
      .map((n) => builtinProfiles().get(n)),
  ).map((p) => p.name);
  assert.equal(names.at(-1), "sunspec", "the generic SunSpec profile comes after the specific ones");
  assert.ok(!names.includes("sdm630") && !names.includes("relay-coils"), "profiles without an expectation are not tried");
});

/** Holding registers by unit (a unit with no registers does not answer at all). */
function fakeBus(units: Record<number, Record<number, number[]>>): Bus {
  return {
    endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 },
    setDeviceDelay() {},
    async read(unit: number, table: string, address: number, count: number) {
      const regs = units[unit];
      if (!regs) throw new SitegateError("MODBUS_TIMEOUT", `unit ${unit}: no answer`, { transient: true });
      const out: number[] = [];
      for (let i = 0; i < count; i++) {
        const at = Object.entries(regs).find(([a, ws]) => Number(a) <= address + i && address + i < Number(a) + ws.length);
        if (!at || table !== "holding")
          throw new SitegateError("MODBUS_EXCEPTION", "exception 2", { details: [{ path: "code", message: "2" }] });
        out.push(at[1][address + i - Number(at[0])]);
      }
      return out;
    },
  } as unknown as Bus;
}

const ascii = (s: string, regs: number) =>
  Array.from({ length: regs }, (_, i) => (s.charCodeAt(2 * i) || 0) * 256 + (s.charCodeAt(2 * i + 1) || 0));

test("identifyUnit names the profile whose identity a unit holds, across sub-device units, and none for a stranger", async () => {
  const profiles = builtinProfiles();
  const em24 = fakeBus({ 1: { 0x000b: [1651], 0x5000: ascii("BX1860062001", 7) } });
  assert.deepEqual(
    (await identifyUnit(em24, 1, profiles, 100)).map((m) => m.profile),
    ["em24"],
  );
  // A Victron GX: the VE.Bus unit (227) holds the state, the system unit 100 the ESS mode and serial.
  // The profile drives ESS mode 3 (external control): a GX in mode 1 is not its device.
  const gxMode1 = fakeBus({ 227: { 31: [9], 33: [3] }, 100: { 800: ascii("c0619ab1", 6), 2902: [1] } });
  assert.deepEqual(await identifyUnit(gxMode1, 227, profiles, 100), [], "ESS mode 1: the GX's own loop, not the profile's path");
  const gx = fakeBus({ 227: { 31: [9], 33: [3] }, 100: { 800: ascii("c0619ab1", 6), 2902: [3] } });
  const m = await identifyUnit(gx, 227, profiles, 100);
  assert.deepEqual(
    m.map((x) => x.profile),
    ["victron-gx"],
  );
  assert.equal(m[0].identity.ess_mode, "3");
  // Another service of the same GX (a battery monitor on 225) answers register 31 but is no VE.Bus unit.
  const gxMonitor = fakeBus({ 227: { 31: [9], 33: [3] }, 225: { 31: [0], 33: [0] }, 100: { 800: ascii("c0619ab1", 6), 2902: [3] } });
  assert.deepEqual(
    (await identifyUnit(gxMonitor, 227, profiles, 100)).map((x) => x.profile),
    ["victron-gx"],
  );
  assert.deepEqual(await identifyUnit(gxMonitor, 225, profiles, 100), [], "the GX's unit 100 does not make every unit a GX");
  // A SolarEdge StorEdge carries the SunSpec marker: the specific profile names it, alone.
  const se = fakeBus({ 1: { 40000: [0x5375, 0x6e53], 40004: ascii("SolarEdge", 16) } });
  assert.deepEqual(
    (await identifyUnit(se, 1, profiles, 100)).map((x) => x.profile),
    ["solaredge-storedge"],
  );
  const huawei = fakeBus({ 1: { 30000: ascii("SUN2000-10KTL-M1", 15), 30015: ascii("HV2150012345", 10) } });
  assert.deepEqual(
    (await identifyUnit(huawei, 1, profiles, 100)).map((x) => x.profile),
    ["huawei-sun2000"],
  );
  const stranger = fakeBus({ 5: { 0: Array(125).fill(1) } });
  assert.deepEqual(await identifyUnit(stranger, 5, profiles, 100), [], "a device that merely answers matches nothing");
});

test("every built-in device profile identifies itself and names its document, a second source and its numbering", () => {
  const reg = new ProfileRegistry();
  for (const name of BRAND_MODELS) {
    const p = reg.get(name);
    assert.equal(p.kind, "fixed", name);
    if (p.kind !== "fixed") continue;
    assert.ok(
      p.identity.some((r) => r.expect),
      `${name} names what identifies it`,
    );
    const header = readFileSync(join(BUILTIN_DIR, `${name}.yaml`), "utf8").split("\nname:")[0];
    for (const want of [/^# Document: /m, /^# Checked against: /m, /^# Numbering: /m]) assert.match(header, want, `${name} header`);
    if (p.role !== "battery") continue;
    const metrics = new Set(p.points.map((pt) => pt.metric));
    for (const m of ["power_w", "soc_pct"]) assert.ok(metrics.has(m), `${name} reads ${m}`);
    // The GX register list quoted publicly has no energy counters at a known address (see the profile).
    if (name !== "victron-gx")
      assert.ok(
        [...metrics].some((m) => m.startsWith("energy_")),
        `${name} reads energy counters`,
      );
    assert.ok(p.op_mode, `${name} maps its op mode`);
    for (const a of ["charge", "discharge", "release"] as const) assert.ok(p.actions[a]?.length, `${name} has ${a}`);
    for (const a of ["charge", "discharge"] as const)
      assert.ok(
        p.actions[a]!.some((s) => s.value === "$watts"),
        `${name} ${a} writes the requested power`,
      );
  }
});
