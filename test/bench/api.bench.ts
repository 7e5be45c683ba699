// Device sync throughput over HTTPS (keep-alive, 4 concurrent clients) against a bare
// fastify HTTPS route that returns the same JSON, with the same TLS, allowlist and
// X-API-Key hook (references.ts), measured in the same run.
import type { BenchFn } from "./types.js";
import { httpsLoad } from "./https-load.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { TEST_API_KEY, testConfigInput } from "../support/config.js";
import { guardedFastify } from "./references.js";
import { testCert } from "../support/tls.js";
import { startSim } from "../../hw-sim/sim.js";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const hammer = (url: string, headers: Record<string, string>, ms: number) => httpsLoad(url, { ms, headers });

const bench: BenchFn = async (ctx) => {
  const ms = ctx.quick ? 1000 : 5000;
  const sim = await startSim({
    seed: 1,
    control: { listen: "127.0.0.1:0" },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { unit: 1, model: "sunspec-storage", name: "b" },
          { unit: 2, model: "sunspec-pv", name: "p" },
          { unit: 3, model: "sunspec-meter", name: "m" },
        ],
      },
    ],
  });
  const gw = await startGateway(ctx.dir, {
    http: { listen: "127.0.0.1:0", tls: { cert: testCert().certFile, key: testCert().keyFile }, rate_limit_per_min: 100_000_000 },
  });
  try {
    const token = await gw.token();
    const devices = [1, 2, 3].map((u) => tcpDevice(`dev-${u}`, sim.tcpPorts[0], u));
    await gw.call("PUT", `/gateway/admin/device/configure?organizationId=6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f&moleculeId=site-001`, {
      headers: { authorization: `Bearer ${token}` },
      body: { devices },
    });
    const path = "/v1/api/gateway/site-001/devicesync";
    const sample = (await gw.call("GET", path, { headers: gw.apiKeyHeaders })).text;
    const bare = guardedFastify({ allowlist: testConfigInput(ctx.dir).auth.ip_allowlist ?? [], apiKey: TEST_API_KEY });
    bare.get(path, async (_req, reply) => reply.type("application/json").send(sample));
    await bare.listen({ host: "127.0.0.1", port: 0 });
    const barePort = (bare.server.address() as { port: number }).port;
    try {
      // Warm both up, then rounds in pairs, the order flipped each round: the ratio is the
      // median of the pairs' ratios, so that the other jobs of a shared machine (which slow
      // both runs of a pair alike) and the order do not decide it.
      const oursRun = () => hammer(gw.url + path, gw.apiKeyHeaders, ms);
      const refRun = () => hammer(`https://127.0.0.1:${barePort}${path}`, { "x-api-key": TEST_API_KEY }, ms);
      await oursRun();
      await refRun();
      const pairs: Array<{ ours: number; ref: number }> = [];
      for (let i = 0; i < (ctx.quick ? 4 : 6); i++) {
        if (i % 2 === 0) {
          const o = await oursRun();
          pairs.push({ ours: o, ref: await refRun() });
        } else {
          const r = await refRun();
          pairs.push({ ours: await oursRun(), ref: r });
        }
      }
      ctx.log(`devicesync req/s ours/reference per round: ${pairs.map((p) => `${p.ours.toFixed(0)}/${p.ref.toFixed(0)}`).join(", ")}`);
      const ours = median(pairs.map((p) => p.ours));
      const ref = median(pairs.map((p) => p.ref));
      return [
        {
          name: "devicesync throughput",
          value: ours,
          unit: "req/s",
          reference: ref,
          ratio: median(pairs.map((p) => p.ours / p.ref)),
          note: "bare fastify HTTPS route, same TLS, allowlist and key hook, same JSON; medians, ratio of paired rounds",
        },
      ];
    } finally {
      await bare.close();
    }
  } finally {
    await gw.stop();
    await sim.stop();
  }
};
export default bench;
