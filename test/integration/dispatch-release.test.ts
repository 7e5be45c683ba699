// Issue 39 finding 1 against the simulator over real sockets: a relay that acknowledges its
// release and does not switch (the simulator's `ignore_writes`) stays in the device ledger,
// /healthz warns, `sitegate_devices_unreleased` counts it, and the release is retried until
// the relay reads back its pre-event coils; `sitegate devices release` asks the running
// gateway to try at once. The truth is the simulator's coils, never the gateway's claims.
import { test } from "node:test";
import assert from "node:assert/strict";
import { event, rigConfig, withDispatchRig } from "../support/dispatch.js";
import { runCli, writeConfig } from "../support/cli.js";
import { testConfigInput } from "../support/config.js";
import { until } from "../support/wait.js";

const coils = (rig: { simDevice(n: string): Record<string, any> }) => rig.simDevice("relay").coils as boolean[];

test("a relay that ignores its release keeps its ledger row and a /healthz warning, is retried, and is released once the fault clears; `devices release` answers through the running gateway", async () => {
  await withDispatchRig({ meter: false, relay: { rated_power_w: 1600 } }, async (rig) => {
    const ev = event({ event_type: "shed", event_quantity: 1.5, event_unit: "kW" }, 800, 3000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    await until(() => coils(rig).every((c) => !c), "the relay shed");
    rig.site.setFault({ device: "relay", fault: "ignore_writes" });
    await rig.waitResponse(ev.event_id);
    const unreleased = async () => {
      const h = await rig.gw.call("GET", "/healthz");
      return (h.json.warnings as Array<{ code: string; message: string }>).filter((w) => w.code === "device_unreleased");
    };
    await until(async () => (await unreleased()).length === 1, "a /healthz warning for the relay", 20_000);
    assert.match((await unreleased())[0]!.message, /device relay is not released \(coil 0 reads 0, was 1 before/);
    assert.match((await rig.gw.call("GET", "/metrics")).text, /\nsitegate_devices_unreleased 1\n/);
    assert.ok(
      coils(rig).every((c) => !c),
      "the simulator's relay is still off",
    );

    // The command, through the running gateway: still refused while the fault lasts.
    const config = writeConfig(rig.dir, testConfigInput(rig.dir, rigConfig(rig.site, rig.sink, ["battery"], { meter: false })), "cli.yaml");
    const stuck = await runCli("devices", "release", "relay", "--config", config);
    assert.equal(stuck.code, 1, stuck.stderr);
    assert.match(stuck.stdout, /^device relay: not released: coil 0 reads 0, was 1 before/);

    rig.site.clearFaults("relay");
    // The command's own attempt, or the backoff's retry just before it (1 s after the refused one above).
    const ok = await runCli("devices", "release", "relay", "--config", config);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /^device relay: released/);
    await until(() => coils(rig).every(Boolean), "the simulator's relay back on");
    await until(async () => (await unreleased()).length === 0, "the warning gone");
    assert.match((await rig.gw.call("GET", "/metrics")).text, /\nsitegate_devices_unreleased 0\n/);
    assert.equal((rig.gw.daemon.storage.db.prepare("SELECT COUNT(*) AS n FROM dp_ledger").get() as { n: number }).n, 0);
  });
});
