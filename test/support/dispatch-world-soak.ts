// `make soak-dispatch`: DISPATCH_SOAK_RUNS generated worlds (10,000 by default) through
// dispatch-world.ts, then the slowest world, the worst measurement error, and per invariant
// how many worlds broke it, each with its first failure shrunk by fast-check to a minimal
// world (the JSON to paste into the regression list of test/unit/dispatch-property.test.ts).
// DISPATCH_SOAK_SEED replays a run; DISPATCH_INVARIANTS (comma list) limits the check;
// the worlds are the harder sites (device faults, restarts, hybrids, load steps and clouds;
// dispatch-world-gen.ts) unless DISPATCH_WORLD_FAULTS=0, with brand batteries unless
// DISPATCH_WORLD_BRANDS=0. Per broken invariant it lists the worlds, each with its brands.
// Exits 1 when any checked invariant broke.
import fc from "fast-check";
import { INVARIANTS, runWorld, type Invariant, type WorldSpec } from "./dispatch-world.js";
import { WORLD_BRANDS, WORLD_FAULTS, worldArb } from "./dispatch-world-gen.js";

const runs = Number(process.env.DISPATCH_SOAK_RUNS ?? 10_000);
const seed = Number(process.env.DISPATCH_SOAK_SEED ?? Date.now() % 2 ** 31);
const checked = new Set<Invariant>(
  process.env.DISPATCH_INVARIANTS ? (process.env.DISPATCH_INVARIANTS.split(",") as Invariant[]) : INVARIANTS,
);
for (const i of checked)
  if (!INVARIANTS.includes(i)) throw new Error(`DISPATCH_INVARIANTS: no invariant "${i}" (${INVARIANTS.join(", ")})`);

/** The property of one invariant set: fast-check shrinks a world that breaks any of them. */
export function holds(invariants: ReadonlySet<Invariant>) {
  return fc.asyncProperty(worldArb, async (w) => {
    const broken = (await runWorld(w)).violations.filter((v) => invariants.has(v.invariant));
    if (broken.length) throw new Error(broken.map((v) => `${v.invariant}: ${v.message}`).join("\n"));
  });
}

/** A world's brand batteries, for the list of broken worlds: " (sma-storage)", or nothing. */
function brandsOf(w: WorldSpec): string {
  const brands = w.batteries.flatMap((b) => (b.brand ? [b.brand] : []));
  return brands.length ? ` (${brands.join(", ")})` : "";
}

async function main(): Promise<void> {
  const started = performance.now();
  let slowest = { ms: 0, index: -1, simulated_s: 0 };
  let worst = { w: 0, index: -1, what: "" };
  const broken = new Map<Invariant, { count: number; first: number; message: string; worlds: number[] }>();
  let simulated = 0;
  const worlds = fc.sample(worldArb, { numRuns: runs, seed });
  for (const [index, w] of worlds.entries()) {
    const t = performance.now();
    const r = await runWorld(w);
    const ms = performance.now() - t;
    simulated += r.simulated_s;
    if (ms > slowest.ms) slowest = { ms, index, simulated_s: r.simulated_s };
    const e = r.worstError.event;
    if (e && r.worstError.w > worst.w)
      worst = {
        w: r.worstError.w,
        index,
        what: `event #${e.index} ${e.type} ${e.requested_w} W: reported ${Math.round(e.reported_w ?? 0)} W, truth ${Math.round(e.truth_w ?? 0)} W`,
      };
    for (const v of r.violations) {
      if (!checked.has(v.invariant)) continue;
      const b = broken.get(v.invariant);
      if (b) {
        if (b.worlds.at(-1) !== index) {
          b.count++;
          b.worlds.push(index);
        }
      } else broken.set(v.invariant, { count: 1, first: index, message: v.message, worlds: [index] });
    }
    if ((index + 1) % 1000 === 0) console.log(`${index + 1} worlds, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  const total = (performance.now() - started) / 1000;
  console.log(
    `seed ${seed}${WORLD_FAULTS ? (WORLD_BRANDS ? " (with faults and brand batteries)" : " (with faults, DISPATCH_WORLD_BRANDS=0)") : " (DISPATCH_WORLD_FAULTS=0)"}: ${runs} worlds, ${Math.round(simulated / 3600)} simulated hours in ${total.toFixed(1)} s (${((total / runs) * 1000).toFixed(1)} ms a world)`,
  );
  console.log(`slowest world: #${slowest.index}, ${slowest.ms.toFixed(0)} ms for ${slowest.simulated_s} simulated s`);
  console.log(`  ${JSON.stringify(worlds[slowest.index])}`);
  console.log(`worst measurement error: ${Math.round(worst.w)} W, world #${worst.index}: ${worst.what}`);
  if (worst.index >= 0) console.log(`  ${JSON.stringify(worlds[worst.index])}`);
  for (const inv of INVARIANTS) {
    if (!checked.has(inv)) continue;
    const b = broken.get(inv);
    console.log(`${inv}: ${b ? `broken in ${b.count} of ${runs} worlds; first #${b.first}: ${b.message}` : "held"}`);
    // Which of them have brand batteries (dispatch-world-brands.ts), and which brands.
    if (b) console.log(`  worlds: ${b.worlds.map((i) => `#${i}${brandsOf(worlds[i]!)}`).join(" ")}`);
  }
  for (const [inv, b] of broken) {
    const r = await fc.check(holds(new Set([inv])), { seed, path: String(b.first) });
    const minimal = r.counterexample?.[0] as WorldSpec | undefined;
    console.log(`${inv}, shrunk (${r.numShrinks} steps) to:\n  ${JSON.stringify(minimal)}`);
    if (minimal) {
      const again = await runWorld(minimal);
      for (const v of again.violations.filter((x) => x.invariant === inv)) console.log(`  ${v.message}`);
    }
  }
  process.exitCode = broken.size ? 1 : 0;
}

if (process.argv[1]?.endsWith("dispatch-world-soak.js")) await main();
