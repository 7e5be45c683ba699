// `sitegate probe` against the simulator's brand models over real sockets: a healthy device
// answers every required point (exit 0); a device with a register missing lists that point
// as unavailable and still exits 0 when the role can do without it; a device whose required
// point does not answer exits 1 and says which.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput } from "../support/site.js";
import { runCli } from "../support/cli.js";
import { BRAND_UNITS, brandsOnTcp } from "../support/brands.js";
import type { ProbeResult } from "../../src/cli/probe.js";
import { startReplay, type ReplayCapture } from "../../hw-sim/replay.js";

const HYBRID = { rated_power_w: 10000, max_power_w: 5000, capacity_wh: 9600, soc_pct: 60, pv_max_w: 6000 };

function oneDevice(device: Record<string, unknown>): ScenarioInput {
  return {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ ...HYBRID, unit: 1, name: "dev", ...device }] }],
  } as ScenarioInput;
}

async function probe(port: number, unit: number, profile: string, ...more: string[]): Promise<{ code: number; r: ProbeResult }> {
  const out = await runCli("probe", "--profile", profile, `tcp://127.0.0.1:${port}`, "--unit", String(unit), "--json", ...more);
  assert.ok(out.stdout.trim(), `${profile}: no output; stderr ${out.stderr}`);
  return { code: out.code, r: JSON.parse(out.stdout) as ProbeResult };
}

test("probe: every brand model answers its required points (exit 0), each point with a state", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    for (const b of BRAND_UNITS) {
      const { code, r } = await probe(site.tcpPorts[0]!, b.unit, b.model);
      assert.equal(code, 0, `${b.model}: ${JSON.stringify(r)}`);
      assert.ok(r.paired && r.required_ok, b.model);
      assert.ok(
        r.points.some((p) => p.required),
        `${b.model}: some point is required`,
      );
      for (const p of r.points.filter((x) => x.required)) assert.equal(p.state, "answers", `${b.model} ${p.metric}: ${p.detail}`);
      const soc = (site.state().devices[b.name] as { soc_pct?: number } | undefined)?.soc_pct;
      const got = r.points.find((p) => p.metric === "soc_pct")?.value;
      if (b.kind === "battery" && soc !== undefined && got !== undefined)
        assert.ok(Math.abs(got - soc) <= 1, `${b.model}: soc ${got} vs ${soc}`);
    }
  });
});

test("probe: a Sungrow without 33046/33047 lists the limits as unavailable (exception 2) and still exits 0", async () => {
  await withSite(oneDevice({ model: "sungrow-sh", power_limits: false }), async (site) => {
    const { code, r } = await probe(site.tcpPorts[0]!, 1, "sungrow-sh");
    assert.equal(code, 0, JSON.stringify(r));
    const limits = r.points.filter((p) => p.register.endsWith(" 33046") || p.register.endsWith(" 33047"));
    assert.ok(limits.length > 0, JSON.stringify(r.points.map((p) => p.register)));
    for (const p of limits) {
      assert.equal(p.state, "unavailable", `${p.metric}: ${p.detail}`);
      assert.match(p.detail, /exception 2/);
    }
    assert.equal(r.points.find((p) => p.metric === "soc_pct")?.state, "answers");
  });
  // and the text says it in words
  await withSite(oneDevice({ model: "sungrow-sh", power_limits: false }), async (site) => {
    const out = await runCli("probe", "--profile", "sungrow-sh", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /unavailable +holding 33046 +the device has no such register/);
    assert.match(out.stdout, /result: every required point answers/);
  });
});

test("probe: a SolarEdge StorEdge without a meter lists the meter's points unavailable, the battery's answer", async () => {
  await withSite(oneDevice({ model: "solaredge-storedge", meter: "none" }), async (site) => {
    const { code, r } = await probe(site.tcpPorts[0]!, 1, "solaredge-storedge");
    assert.equal(code, 0, JSON.stringify(r));
    const meter = r.points.filter((p) => ["grid_power_w", "energy_export_wh", "energy_import_wh"].includes(p.metric));
    assert.equal(meter.length, 3, JSON.stringify(r.points.map((p) => p.metric)));
    for (const p of meter) assert.equal(p.state, "unavailable", `${p.metric}: ${p.detail}`);
    for (const m of ["power_w", "soc_pct"]) assert.equal(r.points.find((p) => p.metric === m)?.state, "answers", m);
  });
});

test("probe: a device another profile describes (identity refuses it) exits 1, its points listed", async () => {
  // The SolarEdge profile on a Sungrow: identity refuses the pairing; the points are listed, the required ones failing.
  await withSite(oneDevice({ model: "sungrow-sh" }), async (site) => {
    const out = await runCli("probe", "--profile", "solaredge-storedge", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--unit", "1");
    assert.equal(out.code, 1, out.stdout + out.stderr);
    assert.match(out.stdout, /NOT paired/);
    assert.match(out.stdout, /result: the gateway cannot use this device/);
  });
});

test("probe: a device that does not answer exits 1 at once; bad usage exits 2", async () => {
  const silent = await runCli("probe", "--profile", "sungrow-sh", "tcp://127.0.0.1:1");
  assert.equal(silent.code, 1, silent.stdout + silent.stderr);
  assert.match(silent.stdout, /NOT paired/);
  const noProfile = await runCli("probe", "tcp://127.0.0.1:1");
  assert.equal(noProfile.code, 2);
  assert.match(noProfile.stderr, /--profile is required/);
  const twice = await runCli("probe", "--profile", "sungrow-sh", "--endpoint", "tcp://127.0.0.1:1", "tcp://127.0.0.1:2");
  assert.equal(twice.code, 2);
});

/** Every captured range holding these registers answers these words instead (a field device's odd values). */
function setWords(cap: ReplayCapture, address: number, words: number[]): void {
  let hit = 0;
  for (const r of cap.ranges)
    if (r.words && r.address <= address && address + words.length <= r.address + r.count) {
      words.forEach((w, i) => (r.words![address - r.address + i] = w));
      hit++;
    }
  assert.ok(hit > 0, `register ${address} is in the capture`);
}

test("probe: a device that reads NaN and values out of range says so per point (an SMA capture, replayed)", async () => {
  const sma = BRAND_UNITS.find((b) => b.model === "sma-storage")!;
  let cap!: ReplayCapture;
  await withSite(brandsOnTcp(), async (site) => {
    const out = await runCli(
      "dump",
      "--endpoint",
      `tcp://127.0.0.1:${site.tcpPorts[0]}`,
      "--unit",
      String(sma.unit),
      "--profile",
      sma.model,
    );
    assert.equal(out.code, 0, out.stderr);
    cap = JSON.parse(out.stdout) as ReplayCapture;
  });
  const odd = structuredClone(cap);
  setWords(odd, 30775, [0x8000, 0x0000]); // ac_power_w, S32 NaN
  setWords(odd, 31395, [0x0098, 0x9680]); // discharge 10,000,000 W: power_w far past the rating
  setWords(odd, 30201, [0, 9999]); // condition: no state SMA names
  let replay = await startReplay(odd);
  try {
    const { code, r } = await probe(replay.port, sma.unit, sma.model);
    const point = (m: string) => r.points.find((p) => p.metric === m);
    assert.equal(point("ac_power_w")?.state, "not_available", JSON.stringify(point("ac_power_w")));
    assert.equal(point("power_w")?.state, "out_of_range", JSON.stringify(point("power_w")));
    assert.match(point("power_w")!.detail, /outside at most \d+ W either way/);
    assert.equal(point("condition")?.state, "out_of_range", JSON.stringify(point("condition")));
    assert.equal(point("soc_pct")?.state, "answers");
    // The required power answers, though with a value no battery gives: usable, and said.
    assert.equal(code, 0, JSON.stringify(r));
    const text = await runCli("probe", "--profile", sma.model, `tcp://127.0.0.1:${replay.port}`, "--unit", String(sma.unit));
    assert.match(text.stdout, /but power_w read no usable value now/);
  } finally {
    await replay.stop();
  }
  // A SOC of 150 %: the profile's identity check refuses the device (as pairing would), and the points are still listed.
  const soc = structuredClone(cap);
  setWords(soc, 30845, [0, 150]);
  replay = await startReplay(soc);
  try {
    const { code, r } = await probe(replay.port, sma.unit, sma.model);
    assert.equal(code, 1, JSON.stringify(r));
    assert.equal(r.paired, false);
    assert.match(r.pairing ?? "", /30845.*150/);
    const p = r.points.find((x) => x.metric === "soc_pct");
    assert.equal(p?.state, "out_of_range", JSON.stringify(p));
    assert.match(p!.detail, /150 is outside 0\.\.100 %/);
  } finally {
    await replay.stop();
  }
});

test("probe: a Sungrow whose SOC register answers exception 2 exits 1 and names soc_pct", async () => {
  let cap!: ReplayCapture;
  await withSite(oneDevice({ model: "sungrow-sh" }), async (site) => {
    const out = await runCli("dump", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--unit", "1", "--profile", "sungrow-sh");
    assert.equal(out.code, 0, out.stderr);
    cap = JSON.parse(out.stdout) as ReplayCapture;
  });
  // Every captured read that holds input 13022 (soc_pct) now answers exception 2.
  for (const r of cap.ranges)
    if (r.table === "input" && r.words && r.address <= 13022 && 13022 < r.address + r.count) {
      delete r.words;
      r.exception = 2;
    }
  const replay = await startReplay(cap);
  try {
    const out = await runCli("probe", "--profile", "sungrow-sh", `tcp://127.0.0.1:${replay.port}`);
    assert.equal(out.code, 1, out.stdout + out.stderr);
    assert.match(out.stdout, /NOT paired: .*lacks soc_pct/);
    assert.match(out.stdout, /soc_pct \* +unavailable +input 13022 +the device has no such register/);
    assert.match(out.stdout, /result: the gateway cannot use this device: soc_pct does not answer/);
  } finally {
    await replay.stop();
  }
});
