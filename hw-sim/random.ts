// Seeded randomness that is a pure function of (seed, key, simulated second), so a
// scenario replays the same values for the same seed whatever the request timing.

/** 32-bit integer hash (a variant of Thomas Wang's / splitmix finalizer). */
function mix(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/** A value in [-1, 1) determined by seed, key and step. */
export function noise(seed: number, key: number, step: number): number {
  const h = mix(mix(mix(seed | 0) ^ (key | 0)) ^ (step | 0));
  return h / 0x80000000 - 1;
}

/** A stable small integer for a string (device names as noise keys, serial numbers). */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
