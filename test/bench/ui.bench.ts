// Resident memory of `sitegate run` on the four-device dispatch site with the status page
// open in headless Chromium (overview and devices polling, 1 s and 2 s) against the same
// daemon run without any page open, each a fresh process for the same time. The bound:
// within 10 MiB. Lower is better, so ratio = without / with.
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { Agent, request } from "undici";
import type { BenchFn } from "./types.js";
import { startSim } from "../../hw-sim/sim.js";
import { testConfigInput, TEST_PASSWORD } from "../support/config.js";
import { siteDevices, siteScenario } from "../support/dispatch.js";
import { testCert } from "../support/tls.js";
import { launchBrowser } from "../support/browser.js";
import { freePort } from "../support/net.js";
import { rssKb } from "../support/site50.js";

import { spawnDaemon, writeConfig } from "../support/cli.js";

const bench: BenchFn = async (ctx) => {
  const runMs = ctx.quick ? 8000 : 45000;
  const sim = await startSim(siteScenario({ irradiance: 0.5 }));
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const run = async (label: string, withPage: boolean): Promise<number> => {
      const port = await freePort();
      const dir = join(ctx.dir, label);
      const cfg = {
        ...testConfigInput(join(dir, "data")),
        log_level: "warn",
        http: { listen: `127.0.0.1:${port}`, tls: { cert: testCert().certFile, key: testCert().keyFile } },
        telemetry: { poll_interval_ms: 1000, retention_max_mb: 64 },
        devices: siteDevices(sim.tcpPorts[0]),
        ui: { enabled: true },
      };
      const child: ChildProcess = spawnDaemon(writeConfig(ctx.dir, cfg, `${label}.yaml`));
      const base = `https://127.0.0.1:${port}`;
      try {
        for (let i = 0; ; i++) {
          try {
            const r = await request(`${base}/ui/login`, { dispatcher: agent });
            await r.body.text();
            if (r.statusCode === 200) break;
          } catch {
            if (i > 200) throw new Error("daemon did not come up");
          }
          await new Promise((r) => setTimeout(r, 50));
        }
        const browser = withPage ? await launchBrowser() : null;
        try {
          if (browser) {
            const c = await browser.newContext({ ignoreHTTPSErrors: true });
            const p = await c.newPage();
            await p.goto(`${base}/ui/login`);
            await p.fill("#username", "partner");
            await p.fill("#password", TEST_PASSWORD);
            await Promise.all([p.waitForNavigation(), p.click("#login-submit")]);
            await p.waitForSelector("#flow-battery-w[data-value]");
            const p2 = await c.newPage();
            await p2.goto(`${base}/ui/devices`);
            await p2.waitForSelector("[data-device-id]");
          }
          const samples: number[] = [];
          for (let t = 0; t < 6; t++) {
            await new Promise((r) => setTimeout(r, runMs / 6));
            samples.push(rssKb(child.pid!, "VmRSS"));
          }
          ctx.log(`${label}: RSS over time (MiB) ${samples.map((k) => (k / 1024).toFixed(1)).join(" ")}`);
          return samples[samples.length - 1];
        } finally {
          await browser?.close();
        }
      } finally {
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
    };
    const without = await run("without-page", false);
    const withPage = await run("with-page", true);
    ctx.log(`difference ${((withPage - without) / 1024).toFixed(1)} MiB (bound: 10 MiB)`);
    return [
      {
        name: "daemon RSS, status page open and polling",
        value: withPage / 1024,
        unit: "MiB",
        reference: without / 1024,
        ratio: without / withPage,
        note: "same daemon, no page open (lower is better; bound +10 MiB)",
      },
    ];
  } finally {
    await agent.close();
    await sim.stop();
  }
};
export default bench;
