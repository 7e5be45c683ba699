// A power as a percentage of a rating: what a claim's share is written as where a
// device's register wants percent (a SunSpec rate), the same for dispatch and a family.

/**
 * Percent of a device's maximum power. Not rounded here: the device's scale factor
 * decides the resolution when the value is written (at SF -2, 2.8 % is 280, not 3 %).
 */
export function pctOf(watts: number, maxW: number): number {
  if (maxW <= 0) return 0;
  return Math.max(0, Math.min(100, Math.round((watts / maxW) * 1e8) / 1e6));
}

/**
 * Whether a battery's power reading shows a charge or discharge setpoint taking effect
 * (B4 closed loop, for registers that cannot be read back): within 10 % (at least 100 W)
 * of the setpoint, or moved from `before` toward it by at least half the way.
 */
export function movesAsAsked(direction: "charge" | "discharge", watts: number, now: number, before: number | undefined): boolean {
  const target = direction === "discharge" ? watts : -watts;
  if (Math.abs(now - target) <= Math.max(100, 0.1 * watts)) return true;
  if (before === undefined) return false;
  const way = target - before;
  return Math.abs(way) > 0 && (now - before) / way >= 0.5;
}
