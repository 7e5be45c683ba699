// Telemetry keeps up with a slow partner: `sitegate run` polls 50 simulated TCP devices on
// 10 hosts every second and pushes to a sink that answers each request after 250 ms.
// Rows: the steady backlog (the most snapshots waiting at any of 5 samples a second; must stay under 5;
// lower is better, ratio = 5 / backlog), the live push rate against the tick rate, and
// how fast a 30 s outage's backlog drains against the tick rate.
import { join } from "node:path";
import { Agent, request } from "undici";
import type { BenchFn } from "./types.js";
import type { ScenarioInput } from "../../hw-sim/sim.js";
import { partnerTo, startSink } from "../support/partner-sink.js";
import { testConfigInput } from "../support/config.js";
import { tcpDevice } from "../support/gateway.js";
import { testCert } from "../support/tls.js";
import { freePort } from "../support/net.js";
import { spawnSim } from "../support/sim-process.js";

import { spawnDaemon, writeConfig } from "../support/cli.js";
const MODELS = ["sunspec-storage", "sunspec-pv", "sunspec-meter", "sunspec-pv", "sunspec-meter"] as const;
const HOSTS = 10;
const PER_HOST = 5;
const BACKLOG_LIMIT = 5;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const bench: BenchFn = async (ctx) => {
  const steadyMs = ctx.quick ? 20_000 : 120_000;
  const outageMs = ctx.quick ? 10_000 : 30_000;
  // The simulator runs in its own process, so the sink's 250 ms answers and the site's
  // Modbus answers do not wait on each other's event loop. It binds its own ports (port 0)
  // and reports them: ports picked here and bound there could be taken in between (a CI run
  // failed so, "the simulator does not listen on ...").
  const scenario: ScenarioInput = {
    seed: 5,
    control: { listen: "127.0.0.1:0" },
    site: { pv_irradiance: 0.5 },
    ports: Array.from({ length: HOSTS }, (_, p) => ({
      kind: "tcp" as const,
      listen: "127.0.0.1:0",
      devices: Array.from({ length: PER_HOST }, (_, u) => ({ unit: u + 1, model: MODELS[u], name: `h${p}-${u}` })),
    })),
  };
  const sim = await spawnSim(ctx.dir, scenario, { LOG_LEVEL: "info" }); // info: its "simulator running" line names the ports
  const tcpPorts = sim.tcp;
  const sink = await startSink();
  sink.delayMs = 250;
  const port = await freePort();
  const devices = tcpPorts.flatMap((tcp, p) => Array.from({ length: PER_HOST }, (_, u) => tcpDevice(`h${p}-${u}`, tcp, u + 1)));
  const cfg = {
    ...testConfigInput(join(ctx.dir, "data")),
    log_level: "warn",
    http: { ...testConfigInput(ctx.dir).http, listen: `127.0.0.1:${port}` },
    partner: partnerTo(sink, { headers: [], timeout_ms: 5000 }),
    telemetry: { poll_interval_ms: 1000, retention_max_mb: 64 },
    devices,
  };
  const child = spawnDaemon(writeConfig(ctx.dir, cfg));
  const agent = new Agent({ connect: { ca: testCert().cert } });
  const gauge = async (name: string): Promise<number> => {
    const r = await request(`https://127.0.0.1:${port}/metrics`, { dispatcher: agent });
    const text = await r.body.text();
    const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : NaN;
  };
  const fullPushes = () => sink.accepted().filter((r) => (r.body?.devices?.length ?? 0) === HOSTS * PER_HOST).length;
  try {
    // Warm-up: every device paired and in the pushes.
    const warmEnd = Date.now() + 60_000;
    while (fullPushes() < 3) {
      if (Date.now() > warmEnd) throw new Error(`no push with all 50 devices after 60 s (${sink.accepted().length} pushes)`);
      await sleep(250); // wait: polling the warm-up, bounded by warmEnd
    }
    // Steady state: the backlog sampled five times a second (a snapshot in flight counts).
    const ticks0 = await gauge("sitegate_poll_snapshots_total");
    const acc0 = sink.accepted().length;
    const t0 = Date.now();
    let maxBacklog = 0;
    const backlog: number[] = [];
    while (Date.now() - t0 < steadyMs) {
      await sleep(200); // wait: the benchmark samples the backlog five times a second in real time
      const b = await gauge("sitegate_samples_pending_snapshots");
      backlog.push(b);
      maxBacklog = Math.max(maxBacklog, b);
    }
    const secs = (Date.now() - t0) / 1000;
    const tickRate = ((await gauge("sitegate_poll_snapshots_total")) - ticks0) / secs;
    ctx.log(
      `late bus snapshots ${await gauge("sitegate_poll_late_snapshots_total")}, push failures ${await gauge('sitegate_uplink_failures_total{lane="data_push"}')}`,
    );
    const pushRate = (sink.accepted().length - acc0) / secs;
    const hist = new Map<number, number>();
    for (const b of backlog) hist.set(b, (hist.get(b) ?? 0) + 1);
    ctx.log(
      `steady backlog (snapshots: samples) ${[...hist]
        .sort((x, y) => x[0] - y[0])
        .map(([k, v]) => `${k}: ${v}`)
        .join(", ")}; ${tickRate.toFixed(2)} snapshots/s stored, ${pushRate.toFixed(2)} pushes/s accepted`,
    );

    // Outage, then drain: how fast the backlog of a partner outage goes, 250 ms a request.
    await sink.refuse();
    await sleep(outageMs); // wait: the outage being measured lasts outageMs of real time
    const before = sink.requests.length;
    await sink.accept();
    // The drain starts with the first answer after the outage (the lane may still be in
    // its backoff when the partner comes back; that wait is not the drain).
    while (sink.requests.length === before) await sleep(20); // wait: polling for the first answer (a timing measurement)
    const built = (await gauge("sitegate_samples_pending_snapshots")) + 1;
    const d0 = sink.requests[before].at - 250;
    const drainEnd = d0 + 300_000;
    while ((await gauge("sitegate_samples_pending_snapshots")) > 1) {
      if (Date.now() > drainEnd) throw new Error("the outage backlog did not drain in 5 min");
      await sleep(100); // wait: polling the drain being timed, bounded by drainEnd
    }
    const drainRate = built / ((Date.now() - d0) / 1000);
    ctx.log(
      `outage backlog ${built} snapshots drained at ${drainRate.toFixed(1)} snapshots/s; sink held up to ${sink.maxInFlight} requests at once`,
    );
    return [
      {
        name: "slow partner (250 ms): steady backlog, 50 devices on 10 hosts",
        value: maxBacklog,
        unit: "snapshots",
        reference: BACKLOG_LIMIT,
        ratio: BACKLOG_LIMIT / Math.max(1, maxBacklog),
        note: "limit (lower is better)",
      },
      {
        name: "slow partner (250 ms): live push rate",
        value: pushRate,
        unit: "pushes/s",
        reference: tickRate,
        ratio: pushRate / tickRate,
        note: "snapshots stored per second",
      },
      {
        name: "slow partner (250 ms): outage backlog drain",
        value: drainRate,
        unit: "snapshots/s",
        reference: tickRate,
        ratio: drainRate / tickRate,
        note: "snapshots stored per second",
      },
    ];
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await agent.close();
    await sink.stop();
    await sim.stop();
  }
};
export default bench;
