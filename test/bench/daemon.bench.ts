// Resident memory of `sitegate run` polling 50 simulated devices and pushing to a partner
// sink, started with the node flags and environment of systemd/sitegate.service, against
// an idle Node.js process under the same flags measured in the same run (lower is better,
// so the ratio is idle / ours); the idle process with and without the flags is their own cost. Steady = the median of the samples after the first third of the run;
// peak = the kernel's high-water mark (VmHWM), start-up included.
// What the unit's flags cost: device-sync requests/s from the same 50-device daemon
// started with the unit's flags and with none (the flags trade burst speed for memory).
// BENCH_NODE_ARGS="--flag ..." and BENCH_ENV="K=V ..." measure other flags or environment
// than the unit's (for exploring).
import { spawn } from "node:child_process";
import { Agent, request } from "undici";
import { testCert } from "../support/tls.js";
import type { BenchFn, BenchRow } from "./types.js";
import { rssKb, startSite50, unitCommand } from "../support/site50.js";
import { httpsLoad } from "./https-load.js";
import { freePort } from "../support/net.js";
import { TEST_API_KEY } from "../support/config.js";
import { makeTmpDir } from "../support/tmp.js";

/** Waits until device sync lists the last of the 50 devices (pairing takes longer on a loaded machine), at most 60 s. */
async function untilPaired(url: string): Promise<void> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  const until = Date.now() + 60_000;
  try {
    for (;;) {
      const res = await request(url, { headers: { "x-api-key": TEST_API_KEY }, dispatcher: agent }).catch(() => undefined);
      const text = res ? await res.body.text() : "";
      if (res?.statusCode === 200 && text.includes('"d4-9"')) return;
      if (Date.now() > until) throw new Error("device sync: the 50 devices were not all paired within 60 s");
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await agent.close();
  }
}

/** Device sync requests/s against a fresh 50-device daemon started with `nodeArgs`. */
async function syncRate(nodeArgs: string[], ms: number): Promise<number> {
  const { dir, cleanup } = makeTmpDir();
  const port = await freePort();
  const site = await startSite50(dir, { nodeArgs, listen: `127.0.0.1:${port}`, rateLimitPerMin: 100_000_000 });
  try {
    const url = `https://127.0.0.1:${port}/v1/api/gateway/site-001/devicesync`;
    const check = (status: number, text: string) => {
      if (status !== 200 || !text.includes('"d4-9"')) throw new Error(`device sync: HTTP ${status}`);
    };
    await untilPaired(url);
    await httpsLoad(url, { ms: 1000, headers: { "x-api-key": TEST_API_KEY }, check });
    return await httpsLoad(url, { ms, headers: { "x-api-key": TEST_API_KEY }, check });
  } finally {
    await site.stop();
    cleanup();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const bench: BenchFn = async (ctx) => {
  const runMs = ctx.quick ? 8000 : 45000;
  const unit = unitCommand();
  const nodeArgs = process.env.BENCH_NODE_ARGS !== undefined ? process.env.BENCH_NODE_ARGS.split(/\s+/).filter(Boolean) : unit.nodeArgs;
  ctx.log(
    `node ${nodeArgs.join(" ")} (env ${Object.entries(unit.env)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")})`,
  );
  const extraEnv = Object.fromEntries(
    (process.env.BENCH_ENV ?? "")
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
  if (Object.keys(extraEnv).length) ctx.log(`extra env ${JSON.stringify(extraEnv)}`);
  const site = await startSite50(ctx.dir, { nodeArgs, extraEnv });
  // The idle reference under the daemon's node flags (like with like), and with none (the flags' own cost).
  const idleProc = (args: string[]) =>
    spawn(process.execPath, [...args, "-e", "setInterval(() => {}, 1000)"], { stdio: "ignore", env: { ...process.env, ...unit.env } });
  const idle = idleProc(nodeArgs);
  const idlePlain = idleProc([]);
  let memory: BenchRow[];
  try {
    const samples: number[] = [];
    const step = 1000;
    for (let t = 0; t < runMs; t += step) {
      await new Promise((r) => setTimeout(r, step));
      samples.push(rssKb(site.child.pid!, "VmRSS") / 1024);
    }
    const peak = rssKb(site.child.pid!, "VmHWM") / 1024;
    const steady = median(samples.slice(Math.floor(samples.length / 3)));
    const ref = rssKb(idle.pid!, "VmRSS") / 1024;
    const refPlain = rssKb(idlePlain.pid!, "VmRSS") / 1024;
    ctx.log(`RSS every ${step / 1000} s (MiB): ${samples.map((k) => k.toFixed(0)).join(" ")}; peak ${peak.toFixed(0)}`);
    const seen = site.devicesSeen();
    ctx.log(`${seen} devices reached the partner in ${site.sink.accepted().length} pushes`);
    if (seen < 50) throw new Error(`only ${seen} of 50 devices reached the partner`);
    memory = [
      {
        name: "resident memory, 50 devices, steady",
        value: steady,
        unit: "MiB",
        reference: ref,
        ratio: ref / steady,
        note: "idle node process, same node flags (lower is better)",
      },
      {
        name: "resident memory, 50 devices, peak",
        value: peak,
        unit: "MiB",
        reference: ref,
        ratio: ref / peak,
        note: "idle node process, same node flags (lower is better)",
      },
      {
        name: "flags' own cost: idle node process, daemon's node flags",
        value: ref,
        unit: "MiB",
        reference: refPlain,
        ratio: refPlain / ref,
        note: "idle node process, no node flags (lower is better)",
      },
    ];
  } finally {
    idle.kill("SIGKILL");
    idlePlain.kill("SIGKILL");
    await site.stop();
  }
  const loadMs = ctx.quick ? 2000 : 6000;
  const flagged = await syncRate(nodeArgs, loadMs);
  const plain = await syncRate([], loadMs);
  ctx.log(`device sync: ${flagged.toFixed(0)} req/s with ${nodeArgs.join(" ") || "no flags"}, ${plain.toFixed(0)} with none`);
  return [
    ...memory,
    {
      name: "flags' own cost: device sync, 50 devices, unit's node flags",
      value: flagged,
      unit: "req/s",
      reference: plain,
      ratio: flagged / plain,
      note: "same daemon, no node flags",
    },
  ];
};
export default bench;
