// The Linux GPIO character device through Debian's gpiod tools (package `gpiod`, libgpiod
// v1 on bookworm). Why the tools and not a library: the character device is ioctl-only, so
// a Node binding is a native addon to build for every architecture (B8 ships no compiler
// on the device), while the tools are a maintained distribution package that a Pi image
// has or gets with one apt line. The cost is a process per driven output and one watching
// the inputs. An output is held by a `gpioset --mode=signal` process for as long as the
// gateway drives it (the kernel releases a line when its holder exits); a change of level
// replaces that process. Inputs are read with gpioget, then watched by one gpiomon.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { SitegateError, errorMessage } from "../errors.js";
import type { ChipBackend, InputWatcher, Level } from "./backend.js";
import { gpiogetArgs, gpiomonArgs, gpiosetArgs, parseGpiodetect, parseGpioget, parseGpiomonLine, resolveChip } from "./gpiod-commands.js";

const run = promisify(execFile);
const RESTART_MS = 1000;
/** A gpioset that has not failed this long after its start holds its line. */
const SETTLE_MS = 150;

export class ChardevChip implements ChipBackend {
  private chipName: string | null = null;
  private readonly holders = new Map<number, { child: ChildProcess; value: Level }>();
  private monitor: ChildProcess | null = null;
  private stopped = false;

  constructor(private readonly chip: string) {}

  private async name(): Promise<string> {
    if (this.chipName) return this.chipName;
    const detected = await run("gpiodetect", [], { timeout: 5000 }).then(
      (r) => parseGpiodetect(r.stdout),
      () => [],
    );
    this.chipName = resolveChip(this.chip, detected);
    return this.chipName;
  }

  async readOutput(line: number): Promise<Level> {
    const held = this.holders.get(line);
    if (held) return held.value;
    const chip = await this.name();
    const r = await run("gpioget", gpiogetArgs(chip, [line]), { timeout: 5000 }).catch((e) => {
      throw new SitegateError("DEVICE_OFFLINE", `gpioget ${chip} ${line}: ${errorMessage(e)}`, { transient: true });
    });
    return parseGpioget(r.stdout, [line]).get(line)!;
  }

  async writeOutput(line: number, value: Level): Promise<void> {
    const chip = await this.name();
    await this.release(line);
    const child = spawn("gpioset", gpiosetArgs(chip, line, value), { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (b: Buffer) => (stderr = (stderr + b.toString()).slice(-500)));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, SETTLE_MS);
      child.once("error", (e) => (clearTimeout(t), reject(new SitegateError("DEVICE_OFFLINE", `gpioset: ${errorMessage(e)}`))));
      child.once(
        "exit",
        (code) => (
          clearTimeout(t),
          reject(new SitegateError("DEVICE_OFFLINE", `gpioset ${chip} ${line}=${value} exited ${code}: ${stderr.trim()}`))
        ),
      );
    });
    this.holders.set(line, { child, value });
    child.once("exit", () => {
      if (this.holders.get(line)?.child === child) this.holders.delete(line);
    });
  }

  private async release(line: number): Promise<void> {
    const held = this.holders.get(line);
    if (!held) return;
    this.holders.delete(line);
    if (held.child.exitCode !== null || held.child.signalCode !== null) return;
    const gone = new Promise((r) => held.child.once("exit", r));
    held.child.kill("SIGTERM");
    await gone;
  }

  async watch(inputs: readonly number[], to: InputWatcher): Promise<void> {
    if (inputs.length === 0) return;
    const start = async () => {
      if (this.stopped) return;
      try {
        const chip = await this.name();
        const r = await run("gpioget", gpiogetArgs(chip, inputs), { timeout: 5000 });
        for (const [l, v] of parseGpioget(r.stdout, inputs)) to.level(l, v);
        const mon = spawn("gpiomon", gpiomonArgs(chip, inputs), { stdio: ["ignore", "pipe", "pipe"] });
        this.monitor = mon;
        createInterface({ input: mon.stdout! }).on("line", (t) => {
          const e = parseGpiomonLine(t);
          if (e) to.level(e.line, e.value);
        });
        to.connected(true);
        mon.once("exit", (code) => {
          if (this.stopped) return;
          to.connected(false, `gpiomon exited ${code}`);
          setTimeout(() => void start(), RESTART_MS);
        });
      } catch (e) {
        to.connected(false, errorMessage(e));
        setTimeout(() => void start(), RESTART_MS);
      }
    };
    await start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.monitor?.kill("SIGTERM");
    await Promise.all([...this.holders.keys()].map((l) => this.release(l)));
  }
}
