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

test("probe: a device whose required point does not answer exits 1 and names it", async () => {
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
