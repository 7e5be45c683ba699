// What the GPIO part needs of a chip, whichever it is (the Linux GPIO character device
// through the gpiod tools, or the simulator's chip over HTTP). Levels are physical (0 low,
// 1 high); active_low and debouncing are the GPIO part's.
export type Level = 0 | 1;

export interface ChipBackend {
  /**
   * Starts watching the inputs: `level` hears each input's level at subscription and at
   * every change after it; `connected` hears when the watch is up or lost.
   */
  watch(
    inputs: readonly number[],
    level: (line: number, value: Level) => void,
    connected: (up: boolean, error?: string) => void,
  ): Promise<void>;
  /** An output's level as the chip has it now. */
  readOutput(line: number): Promise<Level>;
  /** Drives an output; resolves once the chip has it (throws a SitegateError otherwise). */
  writeOutput(line: number, value: Level): Promise<void>;
  stop(): Promise<void>;
}
