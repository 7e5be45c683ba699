// The command lines of Debian's gpiod tools (libgpiod v1, bookworm: gpiodetect, gpioget,
// gpioset, gpiomon) and the parsing of what they print. Pure, so a unit test pins them.
//   gpiodetect                               "gpiochip0 [pinctrl-bcm2711] (58 lines)"
//   gpioget CHIP OFFSET...                   "0 1"
//   gpioset --mode=signal CHIP OFFSET=VALUE  drives the line until SIGTERM (a line the
//                                            process releases goes back to the chip's default)
//   gpiomon --line-buffered --format="%o %e" CHIP OFFSET...   "17 1" per edge (1 rising, 0 falling)
import { SitegateError } from "../errors.js";
import type { Level } from "./backend.js";

export interface DetectedChip {
  name: string;
  label: string;
  lines: number;
}

export function parseGpiodetect(stdout: string): DetectedChip[] {
  const out: DetectedChip[] = [];
  for (const l of stdout.split("\n")) {
    const m = /^(\S+) \[(.*)\] \((\d+) lines\)/.exec(l.trim());
    if (!m) continue;
    // The pattern matched, so all three groups hold text.
    const [, name = "", label = "", lines = ""] = m;
    out.push({ name, label, lines: Number(lines) });
  }
  return out;
}

/**
 * The chip to pass the tools: a path (/dev/gpiochip0) or name (gpiochip0) as given, or the
 * chip whose label it is. A Pi 4's header is `pinctrl-bcm2711`; a Pi 5's is `pinctrl-rp1`,
 * gpiochip4 on older kernels and gpiochip0 on newer ones: a label finds it on either.
 */
export function resolveChip(chip: string, detected: readonly DetectedChip[]): string {
  if (chip.startsWith("/dev/")) return chip;
  if (detected.some((c) => c.name === chip)) return chip;
  const byLabel = detected.filter((c) => c.label === chip);
  const [only, other] = byLabel;
  if (only !== undefined && other === undefined) return only.name;
  if (/^gpiochip\d+$/.test(chip) && detected.length === 0) return chip; // gpiodetect unavailable: trust the name
  const known = detected.map((c) => `${c.name} [${c.label}]`).join(", ") || "none found";
  throw new SitegateError("CONFIG_INVALID", `gpio.chip "${chip}" is no GPIO chip name, path or label here (${known})`);
}

export function gpiogetArgs(chip: string, lines: readonly number[]): string[] {
  return [chip, ...lines.map(String)];
}

export function parseGpioget(stdout: string, lines: readonly number[]): Map<number, Level> {
  const values = stdout.trim().split(/\s+/);
  if (values.length !== lines.length || values.some((v) => v !== "0" && v !== "1"))
    throw new SitegateError("DEVICE_NOT_FOUND", `gpioget printed "${stdout.trim()}" for lines ${lines.join(", ")}`);
  return new Map(lines.map((l, i) => [l, values[i] === "1" ? 1 : 0]));
}

export function gpiosetArgs(chip: string, line: number, value: Level): string[] {
  return ["--mode=signal", chip, `${line}=${value}`];
}

export function gpiomonArgs(chip: string, lines: readonly number[]): string[] {
  return ["--line-buffered", "--format=%o %e", chip, ...lines.map(String)];
}

/** One line of gpiomon's output in gpiomonArgs' format: the line and its level after the edge. */
export function parseGpiomonLine(text: string): { line: number; value: Level } | undefined {
  const m = /^(\d+) ([01])$/.exec(text.trim());
  return m ? { line: Number(m[1]), value: m[2] === "1" ? 1 : 0 } : undefined;
}
