// The small version of `make fleet-scale` in `make bench`: 5 gateways (3 with BENCH_QUICK=1)
// through a 10 s broker outage, the same figures as rows (fleet-scale-run.ts). Figures and
// ratios only; the targets are in the notes (docs/fleet.md, fleet-scale).
import type { BenchFn, BenchRow } from "./types.js";
import { printout, runFleetScale } from "./fleet-scale-run.js";

const med = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] : NaN);
const max = (xs: number[]) => (xs.length ? Math.max(...xs) : NaN);

const bench: BenchFn = async (ctx) => {
  const gateways = ctx.quick ? 3 : 5;
  const r = await runFleetScale(
    ctx.dir,
    { gateways, outageS: 10, warmS: 3, steadyS: ctx.quick ? 10 : 20, afterS: ctx.quick ? 10 : 20 },
    ctx.log,
  );
  for (const line of printout(r).split("\n")) ctx.log(line);
  const what = `fleet-scale ${gateways} gateways, 10 s broker outage`;
  const row = (name: string, value: number, unit: string, reference: number | null, ratio: number | null, note?: string): BenchRow => ({
    name: `${what}: ${name}`,
    value,
    unit,
    reference,
    ratio,
    ...(note ? { note } : {}),
  });
  // The outage's first half against its second: backoff makes the second quieter.
  const half = Math.ceil(r.attemptsPerS.length / 2);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const first = sum(r.attemptsPerS.slice(0, half)) / half;
  const last = sum(r.attemptsPerS.slice(half)) / Math.max(1, r.attemptsPerS.length - half);
  return [
    row("private RSS per gateway, before", med(r.rss.before), "MiB", null, null, "median over gateways (RssAnon)"),
    row(
      "private RSS drift during the outage",
      max(r.rssDrift.during),
      "MiB",
      10,
      10 / Math.max(max(r.rssDrift.during), 0.1),
      "target: flat within 10 MiB (ratio >= 1 meets it); largest over gateways",
    ),
    row(
      "private RSS drift after the drain",
      max(r.rssDrift.after),
      "MiB",
      10,
      10 / Math.max(max(r.rssDrift.after), 0.1),
      "target: within 10 MiB of before; largest over gateways",
    ),
    row("CPU per gateway, before", med(r.cpu.before), "% of a core", null, null, "median over gateways"),
    row(
      "CPU per gateway, during the outage",
      med(r.cpu.during),
      "% of a core",
      med(r.cpu.before),
      med(r.cpu.before) / Math.max(med(r.cpu.during), 0.01),
      "before (higher ratio: cheaper while the broker is down)",
    ),
    row(
      "CPU per gateway, after",
      med(r.cpu.after),
      "% of a core",
      med(r.cpu.before),
      med(r.cpu.before) / Math.max(med(r.cpu.after), 0.01),
      "before",
    ),
    row(
      "snapshots received",
      r.snapshots,
      "snapshots",
      r.stored,
      r.stored ? (r.snapshots - r.duplicated) / r.stored : null,
      "stored by the gateways in the same span (1.00x: none lost)",
    ),
    row("snapshots lost", r.lost, "snapshots", null, null, "target 0 (against each gateway's own store)"),
    row("snapshots duplicated", r.duplicated, "snapshots", null, null, "target 0 (published twice by a gateway)"),
    row(
      "snapshots redelivered to the subscriber",
      r.redelivered,
      "snapshots",
      null,
      null,
      "its own QoS 1 session (DUP flag), not the gateway's doing",
    ),
    row("snapshots out of order", r.outOfOrder, "snapshots", null, null, "target 0"),
    row(
      "connection attempts during the outage",
      r.attempts / gateways,
      "per gateway",
      null,
      null,
      "counted by a TCP listener on the broker's port",
    ),
    row(
      "attempts, first half of the outage",
      first,
      "attempts/s",
      last,
      last > 0 ? first / last : null,
      "its second half (above 1: falling by backoff)",
    ),
    row(
      "offline status messages",
      r.offline,
      "messages",
      null,
      null,
      "mosquitto publishes every Last Will as it stops (Will Delay notwithstanding)",
    ),
    row(
      "retained status online after the drain",
      r.retainedOnline,
      "sites",
      gateways,
      r.retainedOnline / gateways,
      "every site (1.00x: none left offline)",
    ),
    row(
      "reconnect spread (last)",
      max(r.reconnectS),
      "s after the restart",
      null,
      null,
      `median ${med(r.reconnectS).toFixed(1)} s; full jitter`,
    ),
    row("drain", r.drainS, "s after the restart", null, null, "every gateway delivered a snapshot taken after the restart"),
    row(
      "signed ping round trip after the restart",
      med(r.pingMs),
      "ms",
      null,
      null,
      `max ${max(r.pingMs).toFixed(0)} ms; ${r.pingNotOk} not 200`,
    ),
  ];
};
export default bench;
