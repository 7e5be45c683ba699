// `make soak` (SOAK_MIN=60): runs the 50-device site under the unit's flags for SOAK_MIN
// minutes, samples resident memory (/proc) and the V8 heap (/metrics) every 10 s, and
// prints their slopes in MiB/hour (least squares over the second half of the run, after
// start-up has settled), so a leak shows as a number. Ends with where the memory is
// (/proc/PID/smaps by mapping kind, and the V8 heap). Exit 1 if the daemon died.
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { makeTmpDir } from "../support/tmp.js";
import { testCert } from "../support/tls.js";
import { rssKb, startSite50, unitCommand } from "../support/site50.js";
import { freePort } from "../support/net.js";

const MiB = 1024 * 1024;

export function slopePerHour(points: Array<{ t: number; v: number }>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mt = points.reduce((a, p) => a + p.t, 0) / n;
  const mv = points.reduce((a, p) => a + p.v, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.v - mv);
    den += (p.t - mt) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 3_600_000; // per ms -> per hour
}

export async function scrape(url: string, agent: Agent): Promise<Map<string, number>> {
  const res = await request(`${url}/metrics`, { dispatcher: agent });
  const text = await res.body.text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** Resident kB of a process by mapping kind (from /proc/PID/smaps). */
export function smapsBreakdown(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let kind = "";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const [, perms, path] = head;
      if (path === "[heap]") kind = "malloc heap (brk)";
      else if (path.startsWith("[stack")) kind = "stacks";
      else if (path.endsWith("/node") || path.includes("bin/node")) kind = perms.includes("x") ? "node binary code" : "node binary data";
      else if (path.includes(".node")) kind = "native addons (.node)";
      else if (path.includes(".so")) kind = "shared libraries";
      else if (path === "") kind = "anonymous (V8 heap, malloc arenas, thread stacks)";
      else kind = `other: ${path.split("/").pop()}`;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[kind] = (out[kind] ?? 0) + Number(rss[1]);
  }
  return out;
}

async function main(): Promise<number> {
  const minutes = Number(process.env.SOAK_MIN ?? 60);
  const { dir, cleanup } = makeTmpDir();
  const port = await freePort();
  // SOAK_NODE_ARGS="--flag ..." soaks other node flags than the unit's (for exploring).
  const nodeArgs =
    process.env.SOAK_NODE_ARGS !== undefined ? process.env.SOAK_NODE_ARGS.split(/\s+/).filter(Boolean) : unitCommand().nodeArgs;
  const site = await startSite50(dir, { listen: `127.0.0.1:${port}`, nodeArgs });
  const url = `https://127.0.0.1:${port}`;
  const agent = new Agent({ connect: { ca: testCert().cert } });
  const rss: Array<{ t: number; v: number }> = [];
  const heap: Array<{ t: number; v: number }> = [];
  const start = Date.now();
  const end = start + minutes * 60_000;
  process.stderr.write(`soak: ${minutes} min, 50 devices, node ${nodeArgs.join(" ")}\n`);
  try {
    while (Date.now() < end) {
      await new Promise((r) => setTimeout(r, Math.min(10_000, Math.max(0, end - Date.now()))));
      if (site.child.exitCode !== null) throw new Error(`the daemon exited with ${site.child.exitCode}`);
      const t = Date.now() - start;
      rss.push({ t, v: rssKb(site.child.pid!, "VmRSS") / 1024 });
      try {
        const m = await scrape(url, agent);
        heap.push({ t, v: (m.get("nodejs_heap_size_used_bytes") ?? NaN) / MiB });
      } catch (e) {
        process.stderr.write(`soak: /metrics: ${(e as Error).message}\n`);
      }
      const last = rss[rss.length - 1];
      process.stderr.write(
        `  ${(t / 60_000).toFixed(1)} min: RSS ${last.v.toFixed(1)} MiB, heap used ${heap.at(-1)?.v.toFixed(1) ?? "?"} MiB\n`,
      );
    }
    const half = <T extends { t: number }>(xs: T[]) => xs.filter((p) => p.t >= (minutes * 60_000) / 2);
    const m = await scrape(url, agent);
    const br = smapsBreakdown(site.child.pid!);
    console.log(`soak ${minutes} min, 50 devices, ${site.devicesSeen()} reached the partner in ${site.sink.accepted().length} pushes`);
    console.log(
      `RSS  slope ${slopePerHour(half(rss)).toFixed(2)} MiB/hour (last ${rss.at(-1)?.v.toFixed(1)} MiB, peak ${(rssKb(site.child.pid!, "VmHWM") / 1024).toFixed(1)} MiB)`,
    );
    console.log(`heap slope ${slopePerHour(half(heap)).toFixed(2)} MiB/hour (last used ${heap.at(-1)?.v.toFixed(1)} MiB)`);
    console.log("where the resident memory is (MiB):");
    for (const [k, v] of Object.entries(br).sort((a, b) => b[1] - a[1]))
      if (v >= 512) console.log(`  ${(v / 1024).toFixed(1).padStart(6)}  ${k}`);
    const g = (k: string) => ((m.get(k) ?? NaN) / MiB).toFixed(1);
    console.log(
      `  V8 heap used ${g("nodejs_heap_size_used_bytes")} of ${g("nodejs_heap_size_total_bytes")} reserved; external ${g("nodejs_external_memory_bytes")}`,
    );
    return 0;
  } catch (e) {
    process.stderr.write(`soak failed: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await agent.close();
    await site.stop();
    cleanup();
  }
}

if (process.argv[1]?.endsWith("soak.js")) void main().then((c) => process.exit(c));
