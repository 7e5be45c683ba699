// The event loop of `sitegate run` (its own process, the unit's node flags) while it handles
// Authorization headers of thousands of spaces (backtracking bait): /healthz's worst
// answer time during the attack, against its worst time over as many requests with no
// attack. The integration test (api-security.test.ts) checks the answers; this row is the
// latency bound it used to assert (under 100 ms), which load on the machine can break.
import { Agent, request } from "undici";
import type { BenchFn } from "./types.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { testCert } from "../support/tls.js";

const bench: BenchFn = async (ctx) => {
  const rounds = ctx.quick ? 1 : 5;
  const d = await spawnDaemon(ctx.dir);
  const agent = new Agent({ connect: { ca: testCert().cert }, pipelining: 1 });
  try {
    const healthz = async () => {
      const t = performance.now();
      const r = await request(`${d.url}/healthz`, { dispatcher: agent });
      await r.body.text();
      if (r.statusCode !== 200) throw new Error(`/healthz answered ${r.statusCode}`);
      return performance.now() - t;
    };
    await healthz(); // the connection and TLS session are set up first
    const during: number[] = [];
    for (let i = 0; i < rounds; i++) {
      // 16,000 spaces: over the header cap; 7,000: parsed by the token route.
      const attack = [16_000, 16_000, 16_000, 7_000, 7_000, 7_000].map((n) =>
        request(`${d.url}/connect/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic${" ".repeat(n)}x y` },
          body: "grant_type=password",
          dispatcher: agent,
        }).then(
          (r) => r.body.text(),
          () => "", // the server may close the connection after 431
        ),
      );
      let done = false;
      const all = Promise.all(attack).finally(() => (done = true));
      let n = 0;
      while (!done || n < 3) {
        during.push(await healthz());
        n++;
      }
      await all;
    }
    const quiet: number[] = [];
    for (let i = 0; i < during.length; i++) quiet.push(await healthz());
    const worst = Math.max(...during);
    const ref = Math.max(...quiet);
    ctx.log(`/healthz during the attack: ${during.length} requests, worst ${worst.toFixed(1)} ms (no attack: ${ref.toFixed(1)} ms)`);
    if (!d.alive()) throw new Error("the daemon died under the attack");
    return [
      {
        name: "/healthz worst answer during ReDoS-bait headers",
        value: worst,
        unit: "ms",
        reference: ref,
        ratio: ref / worst,
        note: "/healthz's worst over as many requests, no attack (was a test bound: 100 ms)",
      },
    ];
  } finally {
    await agent.close();
    await d.stop();
  }
};
export default bench;
