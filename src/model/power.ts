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
