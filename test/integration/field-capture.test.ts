// `sitegate dump` against the simulator's brand models over real sockets: every brand's
// capture holds the answers of the ranges its profile reads, the serial number masked; a
// register the device lacks is recorded as the exception it answered.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput } from "../support/site.js";
import { runCli } from "../support/cli.js";
import { BRAND_UNITS, brandsOnTcp } from "../support/brands.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { MASK_WORD, type Capture } from "../../src/modbus/device/capture.js";
import { startReplay, type ReplayCapture } from "../../hw-sim/replay.js";

function loadCaptureText(text: string): ReplayCapture {
  return JSON.parse(text) as ReplayCapture;
}

test("a dump of each brand model holds its profile's ranges, answered, with the serial masked", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const endpoint = `tcp://127.0.0.1:${site.tcpPorts[0]}`;
    for (const b of BRAND_UNITS) {
      const out = await runCli("dump", "--endpoint", endpoint, "--unit", String(b.unit), "--profile", b.model);
      assert.equal(out.code, 0, `${b.model}: ${out.stderr}`);
      const cap = JSON.parse(out.stdout) as Capture;
      assert.equal(cap.profile, b.model);
      assert.ok(cap.ranges.length > 0, b.model);
      const answered = cap.ranges.filter((r) => r.words);
      assert.ok(answered.length >= cap.ranges.length / 2, `${b.model}: ${answered.length} of ${cap.ranges.length} answered`);
      for (const r of answered) assert.equal(r.words!.length, r.count, `${b.model} ${r.address}`);
      const p = builtinProfiles().get(b.model);
      const serial = p.kind === "fixed" ? p.identity.find((i) => i.name === "serial") : undefined;
      if (serial) {
        const r = cap.ranges.find((x) => x.address === serial.address && x.table === serial.table);
        assert.ok(r?.masked, `${b.model}: serial at ${serial.address} masked`);
        assert.ok(
          r.words!.every((w) => w === MASK_WORD),
          `${b.model}: serial words ${r.words}`,
        );
      }
      if (p.kind === "sunspec")
        assert.ok(
          cap.ranges.some((r) => r.masked),
          `${b.model}: the common model's SN masked`,
        );
    }
  });
});

test("a dump records exception 2 where the device lacks a register (Sungrow without 33046/33047)", async () => {
  const hybrid = { model: "sungrow-sh", rated_power_w: 10000, max_power_w: 5000, capacity_wh: 9600, soc_pct: 60, pv_max_w: 6000 };
  const sc = {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ ...hybrid, unit: 1, name: "old_firmware", power_limits: false }] }],
  } as ScenarioInput;
  await withSite(sc, async (site) => {
    const out = await runCli("dump", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--unit", "1", "--profile", "sungrow-sh");
    assert.equal(out.code, 0, out.stderr);
    const cap = JSON.parse(out.stdout) as Capture;
    const limit = cap.ranges.find((r) => r.address === 33046);
    assert.ok(limit, JSON.stringify(cap.ranges.map((r) => r.address)));
    assert.equal(limit.exception, 2);
    assert.equal(limit.words, undefined);
  });
});

test("a dump with no answer at all says so and fails", async () => {
  const out = await runCli("dump", "--endpoint", "tcp://127.0.0.1:1", "--unit", "1", "--profile", "sungrow-sh", "--timeout-ms", "200");
  assert.equal(out.code, 1);
  assert.match(out.stderr, /no range answered/);
});

test("each brand model's dump, replayed frozen, pairs and reads as the live device did", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const endpoint = `tcp://127.0.0.1:${site.tcpPorts[0]}`;
    for (const b of BRAND_UNITS) {
      const dumped = await runCli("dump", "--endpoint", endpoint, "--unit", String(b.unit), "--profile", b.model);
      assert.equal(dumped.code, 0, `${b.model}: ${dumped.stderr}`);
      const live = await runCli("read", "--endpoint", endpoint, "--unit", String(b.unit), "--profile", b.model, "--json");
      assert.equal(live.code, 0, `${b.model}: ${live.stderr}`);
      const replay = await startReplay(loadCaptureText(dumped.stdout));
      try {
        const out = await runCli(
          "read",
          "--endpoint",
          `tcp://127.0.0.1:${replay.port}`,
          "--unit",
          String(b.unit),
          "--profile",
          b.model,
          "--json",
        );
        assert.equal(out.code, 0, `${b.model} replayed: ${out.stderr}`);
        const [l, r] = [JSON.parse(live.stdout), JSON.parse(out.stdout)];
        const same = (d: Record<string, unknown>) => ({ ...d, endpoint: undefined, serial: undefined });
        assert.deepEqual(same(r.device), same(l.device), `${b.model}: the replay pairs as the same device`);
        if (l.device.serial !== undefined) assert.notEqual(r.device.serial, l.device.serial, `${b.model}: the serial is masked`);
        assert.deepEqual(Object.keys(r.metrics).sort(), Object.keys(l.metrics).sort(), b.model);
        assert.deepEqual(r.unavailable, l.unavailable, b.model);
        const soc = (site.state().devices[b.name] as { soc_pct?: number } | undefined)?.soc_pct;
        if (b.kind === "battery" && soc !== undefined)
          assert.ok(Math.abs(r.metrics.soc_pct - soc) <= 1, `${b.model}: soc ${r.metrics.soc_pct} vs the simulator's ${soc}`);
      } finally {
        await replay.stop();
      }
    }
  });
});
