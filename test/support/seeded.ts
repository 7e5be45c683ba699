// mulberry32: a small deterministic PRNG for the fuzzers and the power-cut run, so a failing
// run can be replayed by its seed (the same seed gives the same cases and moments).

/** Numbers in [0, 1) from `seed`. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One generator from `seed`: `rnd()` in [0, 1), `int(n)` in [0, n), `pick(xs)` one of xs. */
export function seeded(seed: number): { rnd: () => number; int: (n: number) => number; pick: <T>(xs: readonly T[]) => T } {
  const rnd = mulberry32(seed);
  const int = (n: number) => Math.floor(rnd() * n);
  return { rnd, int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)] };
}
