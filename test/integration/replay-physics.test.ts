// Field captures on the bench with physics: each battery brand model is dumped with
// `sitegate dump` (the dump made here, from the model, not kept as a file), and the dump is
// served with the brand model's physics on top (`sitegate-sim --replay --physics`). The
// real daemon pairs every replayed device, polls it, and drives a charge and then a
// discharge event of one hour each (cancelled once the device has done what the event asks):
// the simulator's truth (GET /state: battery power, SOC) must show each battery charging,
// its SOC rising, then discharging, its SOC falling, and back in its own mode at the end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { BATTERY_BRANDS, brandsOnTcp } from "../support/brands.js";
import { event, makeRig, startSink, waitPaired, POLL_MS } from "../support/dispatch.js";
import { partnerTo } from "../support/partner-sink.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { control, withSite } from "../support/site.js";
import { MASK_WORD } from "../../src/modbus/device/capture.js";
import { withTmpDir } from "../support/tmp.js";
import { runCli } from "../support/cli.js";
import { until } from "../support/wait.js";
import { REPLAY_DEVICE, startPhysicsReplay } from "../../hw-sim/replay-physics.js";
import { loadCapture, type ReplayCapture } from "../../hw-sim/replay.js";
import type { SimHandle } from "../../hw-sim/sim.js";

const PER_DEVICE_W = 1500;
const HOUR_MS = 3_600_000;

/** The replayed device as the simulator's control API says it is (GET /state over HTTP). */
function truth(sim: SimHandle): Promise<{ power_w: number; soc_pct: number; mode?: string }> {
  return new Promise((resolve, reject) => {
    request(`${sim.controlUrl}/state`, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => {
        try {
          resolve(JSON.parse(body).devices[REPLAY_DEVICE]);
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      });
    })
      .on("error", reject)
      .end();
  });
}

/** Every battery brand's dump of the brands site, as `sitegate dump` writes it, checked as the simulator loads a file. */
async function dumps(dir: string, brands = BATTERY_BRANDS): Promise<Map<string, ReplayCapture>> {
  const out = new Map<string, ReplayCapture>();
  await withSite(brandsOnTcp(), async (site) => {
    for (const b of brands) {
      const r = await runCli("dump", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--unit", String(b.unit), "--profile", b.model);
      assert.equal(r.code, 0, `${b.model}: ${r.stderr}`);
      const file = join(dir, `${b.model}.json`);
      writeFileSync(file, r.stdout);
      out.set(b.model, loadCapture(file));
    }
  });
  return out;
}

async function untilEvery(
  sims: Map<string, SimHandle>,
  ok: (s: Awaited<ReturnType<typeof truth>>, model: string) => boolean,
  what: string,
) {
  let last: Record<string, unknown> = {};
  try {
    await until(
      async () => {
        last = Object.fromEntries(await Promise.all([...sims].map(async ([m, s]) => [m, await truth(s)] as const)));
        return Object.entries(last).every(([m, s]) => ok(s as Awaited<ReturnType<typeof truth>>, m));
      },
      what,
      30_000,
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}: ${JSON.stringify(last)}`, { cause: e });
  }
}

test("every battery brand's dump, replayed with its model's physics, pairs, polls, and charges then discharges for the daemon", async () => {
  await withTmpDir(async (dir) => {
    const captures = await dumps(dir);
    const sims = new Map<string, SimHandle>();
    const sink = await startSink();
    try {
      for (const [model, cap] of captures) sims.set(model, await startPhysicsReplay(cap));
      const devices = BATTERY_BRANDS.map((b) =>
        tcpDevice(b.model, sims.get(b.model)!.tcpPorts[0]!, b.unit, b.model, {
          mb_device_type: 3,
          ...(builtinProfiles().get(b.model).max_power ? {} : { rated_power_w: 5000 }),
        }),
      );
      const gw = await startGateway(dir, {
        partner: partnerTo(sink),
        telemetry: { poll_interval_ms: POLL_MS, retention_max_mb: 64, commit_interval_s: 1 },
        devices: devices as ConfigInput["devices"],
      });
      try {
        await waitPaired(gw, devices.length);
        // Polling: the daemon reads each replayed battery's SOC as the model has it.
        await until(
          async () => {
            const r = await gw.deviceSync();
            return r.status === 200 && r.json.devices.length === devices.length;
          },
          "device sync lists every replayed battery",
          30_000,
        );
        const start = new Map<string, number>();
        for (const [m, s] of sims) start.set(m, (await truth(s)).soc_pct);
        const rig = makeRig([...sims.values()][0]!, gw, sink, dir);
        const total = PER_DEVICE_W * devices.length;

        const charge = event({ event_type: "charge", event_quantity: total, event_unit: "w" }, 1500, HOUR_MS);
        assert.equal((await rig.dr({ mode: "live", event_slots: [charge] })).status, 200);
        await untilEvery(sims, (s) => s.power_w < -PER_DEVICE_W / 2, "every replayed battery charging by the simulator's truth");
        await untilEvery(sims, (s, m) => s.soc_pct > start.get(m)!, "every replayed battery's SOC rising");
        assert.equal((await rig.dr({ mode: "live", event_slots: [{ ...charge, cancelled: true }] })).status, 200);

        const mid = new Map<string, number>();
        for (const [m, s] of sims) mid.set(m, (await truth(s)).soc_pct);
        const discharge = event({ event_type: "discharge", event_quantity: total, event_unit: "w" }, 1500, HOUR_MS);
        assert.equal((await rig.dr({ mode: "live", event_slots: [discharge] })).status, 200);
        await untilEvery(sims, (s) => s.power_w > PER_DEVICE_W / 2, "every replayed battery discharging by the simulator's truth");
        await untilEvery(sims, (s, m) => s.soc_pct < mid.get(m)!, "every replayed battery's SOC falling");
        assert.equal((await rig.dr({ mode: "live", event_slots: [{ ...discharge, cancelled: true }] })).status, 200);

        // Released: each battery back in its brand's own mode (the model's name for it).
        const own = new Map(BATTERY_BRANDS.map((b) => [b.model, b.ownMode ?? "self-consumption"]));
        await untilEvery(sims, (s, m) => s.mode === own.get(m), "every replayed battery back in its own mode");
      } finally {
        await gw.stop();
      }
    } finally {
      await Promise.all([...sims.values()].map((s) => s.stop()));
      await sink.stop();
    }
  });
});

test("a physics replay serves the capture where the model has not moved, the model where it has, and refuses a profile with no brand model", async () => {
  await withTmpDir(async (dir) => {
    const b = BATTERY_BRANDS[0]!;
    const cap = (await dumps(dir, [b])).get(b.model)!;
    // A field device that differs from the model: its serial (masked) and every other identity word as captured.
    const sim = await startPhysicsReplay(cap);
    try {
      const out = await runCli("dump", "--endpoint", `tcp://127.0.0.1:${sim.tcpPorts[0]}`, "--unit", String(b.unit), "--profile", b.model);
      assert.equal(out.code, 0, out.stderr);
      const again = JSON.parse(out.stdout) as ReplayCapture;
      const same = (r: ReplayCapture["ranges"][number]) =>
        again.ranges.find((x) => x.unit === r.unit && x.table === r.table && x.address === r.address && x.count === r.count);
      const masked = cap.ranges.filter((r) => r.words?.length && r.words.every((w) => w === MASK_WORD));
      assert.ok(masked.length > 0, `${b.model}: the capture has a masked serial`);
      for (const r of masked)
        assert.deepEqual(same(r)?.words, r.words, `${b.model}: the capture's (masked) serial at ${r.address} is served, not the model's`);
      for (const r of cap.ranges.filter((x) => x.exception !== undefined))
        assert.equal(same(r)?.exception, r.exception, `${b.model}: the capture's exception at ${r.address} is served`);
      // The model moves: its SOC set through the control API is what the device answers now, not the capture's.
      const read = async () => {
        const r = await runCli(
          "read",
          "--endpoint",
          `tcp://127.0.0.1:${sim.tcpPorts[0]}`,
          "--unit",
          String(b.unit),
          "--profile",
          b.model,
          "--json",
        );
        assert.equal(r.code, 0, r.stderr);
        return JSON.parse(r.stdout) as { metrics: Record<string, number>; device: Record<string, string> };
      };
      const before = await read();
      assert.match(before.device.serial ?? "", /^X+$/, `${b.model}: the capture's masked serial, not the model's`);
      const soc = before.metrics.soc_pct! > 50 ? 21 : 79;
      assert.equal((await control(sim, "POST", `/devices/${REPLAY_DEVICE}`, { soc_pct: soc })).status, 200);
      const after = await read();
      assert.ok(
        Math.abs(after.metrics.soc_pct! - soc) <= 1,
        `${b.model}: soc ${after.metrics.soc_pct} after the model's ${soc} (was ${before.metrics.soc_pct})`,
      );
      assert.deepEqual(after.device, before.device, `${b.model}: the identity stays the capture's`);
    } finally {
      await sim.stop();
    }
    await assert.rejects(startPhysicsReplay({ ...cap, profile: "sunspec" }), /no brand model for profile "sunspec"/);
  });
});
