// The GPIO family's config block (DESIGN B2, `gpio`): the chip and its lines. Device types
// are the wire codes device sync publishes: 40 an input, 41 an output. config/schema.ts
// composes this block into the file's schema; this module imports only zod and src/util,
// so nothing here reaches config/.
import { z } from "zod";
import { deviceId, deviceName, ratedPower, shedPriority } from "../util/device-fields.js";

const onActive = z.strictObject({
  event_type: z.literal("pv_limit", { error: 'must be "pv_limit"' }).describe("The local event run while the input is active"),
  limit_pct: z.number().min(0, "must be 0..100").max(100, "must be 0..100").describe("PV output limit, % of rated power"),
  priority: z.number().int().min(0).optional().describe("The event's priority; default 0"),
});
const line = z.number().int().min(0).max(1023).describe("The line's offset on the chip");
const activeLow = z.boolean().default(false).describe("The line is active at level 0");

const gpioOutput = z.strictObject({
  device_id: deviceId,
  device_name: deviceName,
  line,
  device_type: z.literal(41).describe("41: an output (a switched load), 40: an input"),
  active_low: activeLow,
  rated_power_w: ratedPower.optional(),
  shed_priority: shedPriority.optional(),
});

const gpioInput = z.strictObject({
  device_id: deviceId,
  device_name: deviceName,
  line,
  device_type: z.literal(40).describe("41: an output (a switched load), 40: an input"),
  active_low: activeLow,
  debounce_ms: z.number().int().min(0).max(10_000).default(20).describe("Input: a level must hold this long to count (ms)"),
  on_active: onActive.optional().describe("Input: a local event that runs while the input is active (a ripple-control receiver)"),
});

export const gpioSchema = z
  .strictObject({
    backend: z
      .enum(["chardev", "sim"], { error: 'must be "chardev" (the Linux GPIO character device) or "sim" (the simulator)' })
      .describe("chardev: the Linux GPIO character device (Debian's gpiod tools); sim: the simulator's chip (tests)"),
    chip: z
      .string()
      .min(1)
      .describe("chardev: a chip name (gpiochip0), path (/dev/gpiochip0) or label (pinctrl-bcm2711); sim: the simulator's control URL"),
    lines: z
      .array(z.discriminatedUnion("device_type", [gpioOutput, gpioInput], { error: "device_type must be 41 (output) or 40 (input)" }))
      .max(64)
      .default([])
      .describe("The lines the gateway uses"),
  })
  .superRefine((g, ctx) => {
    if (g.backend === "sim" && !/^https?:\/\/[^/]+/.test(g.chip))
      ctx.addIssue({
        code: "custom",
        path: ["chip"],
        message: "with backend sim, must be the simulator's control URL (http://127.0.0.1:PORT)",
      });
    const seen = new Map<number, number>();
    g.lines.forEach((l, i) => {
      const j = seen.get(l.line);
      if (j !== undefined) ctx.addIssue({ code: "custom", path: ["lines", i, "line"], message: `line ${l.line} is already lines[${j}]` });
      seen.set(l.line, i);
    });
  });

export type GpioConfig = z.infer<typeof gpioSchema>;
export type GpioLineConfig = GpioConfig["lines"][number];
export type GpioOutputConfig = z.infer<typeof gpioOutput>;
export type GpioInputConfig = z.infer<typeof gpioInput>;

/** The device ids the `gpio` block declares, by config path (for the one device_id check, device-ids.ts). */
export function gpioDeclaredIds(cfg: { gpio?: { lines: ReadonlyArray<{ device_id: string }> } | undefined }) {
  return (cfg.gpio?.lines ?? []).map((d, i) => ({ device_id: d.device_id, family: "gpio", where: `gpio.lines[${i}]` }));
}

/** An output line (a switched load) rather than an input. */
export function isGpioOutput(l: GpioLineConfig): l is GpioOutputConfig {
  return l.device_type === 41;
}
