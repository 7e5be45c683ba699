// What the GPIO part needs of a chip, whichever it is (the Linux GPIO character device
// through the gpiod tools, or the simulator's chip over HTTP). Levels are physical (0 low,
// 1 high); active_low and debouncing are the GPIO part's.
export type Level = 0 | 1;

/** Who hears a watch: each input's level at subscription and at every change after it, and when the watch is up or lost. */
export interface InputWatcher {
  level(line: number, value: Level): void;
  connected(up: boolean, error?: string): void;
}

export interface ChipBackend {
  /** Starts watching the inputs; `to` hears their levels and the state of the watch. */
  watch(inputs: readonly number[], to: InputWatcher): Promise<void>;
  /** An output's level as the chip has it now. */
  readOutput(line: number): Promise<Level>;
  /** Drives an output; resolves once the chip has it (throws a SitegateError otherwise). */
  writeOutput(line: number, value: Level): Promise<void>;
  stop(): Promise<void>;
}
