// The GPIO lines of the config as local devices: an output (41) is a switched load (on =
// its active level), an input (40) a contact whose debounced active state is its
// telemetry and, with `on_active`, the trigger of a local event (announced through the one
// function the composition root gives it). The chip is the Linux character device through
// the gpiod tools, or the simulator's chip.
import { SitegateError, errorMessage } from "../errors.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { isGpioOutput, type GpioConfig, type GpioInputConfig, type GpioLineConfig, type GpioOutputConfig } from "./config-schema.js";
import { opModeCode } from "../model/roles.js";
import { gpioTyped } from "./wire-types.js";
import { LocalDevice, type LocalPre, type LocalRole } from "../devices/local.js";
import { declaredFromRegisters } from "../modbus/device/pre-state.js";
import type { DeviceFamily } from "../devices/family.js";
import { capabilitiesOf, type DeviceDescriptor, type DeviceHealth, type Metrics, type PreState } from "../model/device.js";
import type { ChipBackend, Level } from "./backend.js";
import { ChardevChip } from "./chardev-chip.js";
import { SimChip } from "./sim-chip.js";

type OutputConfig = GpioOutputConfig;
export type InputConfig = GpioInputConfig;

/** Told when an input's debounced active state is first known and whenever it changes. */
export type InputListener = (input: InputConfig, active: boolean) => void;

abstract class GpioDevice extends LocalDevice {
  protected readonly family = "gpio";
  protected ok: string | null = null;
  protected error: string | null = "not read yet";

  constructor(
    protected readonly cfg: GpioLineConfig,
    protected readonly chip: string,
  ) {
    super(cfg);
  }

  /** A ledger row of an earlier release holds the register form these devices had then (the Modbus family reads it). */
  protected override earlierPre(pre: PreState): LocalPre {
    return declaredFromRegisters(pre);
  }

  address(): string {
    return `${this.chip} line ${this.cfg.line}`;
  }

  protected reported(): DeviceHealth {
    const online = this.error === null;
    return {
      online,
      last_ok_at: this.ok,
      last_error: this.error,
      consecutive_failures: online ? 0 : 1,
      op_mode: opModeCode(online ? "automatic" : "unknown"),
    };
  }

  protected okNow(): void {
    this.ok = new Date().toISOString();
    this.error = null;
  }
}

class GpioOutput extends GpioDevice {
  readonly role: LocalRole = "switch";
  private on: boolean | undefined;

  constructor(
    private readonly out: OutputConfig,
    chip: string,
    private readonly backend: ChipBackend,
  ) {
    super(out, chip);
  }

  descriptor(): DeviceDescriptor {
    return {
      ...gpioTyped("switch"),
      ...(this.rated_power_w !== undefined ? { max_power_w: this.rated_power_w } : {}),
      capabilities: capabilitiesOf(this),
      profile: "gpio",
      identity: { line: String(this.out.line) },
    };
  }

  latest(): Metrics {
    return this.on === undefined ? {} : { state: this.on ? 1 : 0 };
  }

  private levelOf(on: boolean): Level {
    return on !== this.out.active_low ? 1 : 0;
  }

  override async readOn(): Promise<boolean> {
    try {
      const level = await this.backend.readOutput(this.out.line);
      this.on = (level === 1) !== this.out.active_low;
      this.okNow();
      return this.on;
    } catch (e) {
      this.error = errorMessage(e);
      throw e;
    }
  }

  override async setOn(on: boolean): Promise<void> {
    try {
      await this.backend.writeOutput(this.out.line, this.levelOf(on));
      // A write counts once the line reads it back (B4 closed loop).
      const level = await this.backend.readOutput(this.out.line);
      this.on = (level === 1) !== this.out.active_low;
      if (this.on !== on)
        throw new SitegateError(
          "CONTROL_NOT_CONFIRMED",
          `${this.device_id}: line ${this.out.line} reads ${this.on ? "on" : "off"} after it was switched ${on ? "on" : "off"}`,
        );
      this.okNow();
    } catch (e) {
      this.error = errorMessage(e);
      throw e;
    }
  }
}

class GpioInput extends GpioDevice {
  readonly role: LocalRole = "input";
  /** The debounced active state (undefined until the first level). */
  active: boolean | undefined;
  private raw: Level | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly input: InputConfig,
    chip: string,
    private readonly changed: (d: GpioInput) => void,
  ) {
    super(input, chip);
  }

  descriptor(): DeviceDescriptor {
    return { ...gpioTyped("input"), capabilities: capabilitiesOf(this), profile: "gpio", identity: { line: String(this.input.line) } };
  }

  latest(): Metrics {
    return this.active === undefined ? {} : { state: this.active ? 1 : 0 };
  }

  /** A level from the chip: the first is taken at once; a change stands once it held for debounce_ms. */
  level(value: Level): void {
    this.okNow();
    this.raw = value;
    const take = () => {
      const active = (this.raw === 1) !== this.input.active_low;
      if (active === this.active) return;
      this.active = active;
      this.changed(this);
    };
    clearTimeout(this.timer);
    if (this.active === undefined || this.input.debounce_ms === 0) take();
    else this.timer = setTimeout(take, this.input.debounce_ms);
  }

  lost(error: string): void {
    this.error = error;
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}

export class GpioLines implements Part, DeviceFamily {
  readonly name = "gpio";
  readonly family = "gpio";
  private readonly backend: ChipBackend;
  private readonly outputs: GpioOutput[] = [];
  private readonly inputs: GpioInput[] = [];

  constructor(
    private readonly cfg: GpioConfig,
    private readonly log: Logger,
    /** Told of every input change (the composition root's `input`). */
    private readonly changed: InputListener,
    backend?: ChipBackend,
  ) {
    this.backend = backend ?? (cfg.backend === "sim" ? new SimChip(cfg.chip) : new ChardevChip(cfg.chip));
    for (const l of cfg.lines) {
      if (isGpioOutput(l)) this.outputs.push(new GpioOutput(l, cfg.chip, this.backend));
      else this.inputs.push(new GpioInput(l, cfg.chip, (d) => this.tell(d)));
    }
  }

  devices(): readonly LocalDevice[] {
    return [...this.outputs, ...this.inputs];
  }

  private tell(d: GpioInput): void {
    this.log.info({ device_id: d.device_id, line: d.input.line, active: d.active }, "gpio input");
    this.changed(d.input, d.active!);
  }

  /** Reads the outputs' levels (without driving them) and starts watching the inputs; a chip that does not answer is retried, not fatal. */
  async start(): Promise<void> {
    for (const o of this.outputs)
      await o.readOn().catch((e) => this.log.warn({ device_id: o.device_id, err: errorMessage(e) }, "cannot read gpio output"));
    const byLine = new Map(this.inputs.map((i) => [i.input.line, i]));
    await this.backend.watch(
      this.inputs.map((i) => i.input.line),
      {
        level: (line, value) => byLine.get(line)?.level(value),
        connected: (up, error) => {
          if (up) return;
          this.log.warn({ err: error }, "gpio inputs not watched; retrying");
          for (const i of this.inputs) i.lost(error ?? "not watched");
        },
      },
    );
  }

  async stop(): Promise<void> {
    for (const i of this.inputs) i.stop();
    await this.backend.stop();
  }
}
