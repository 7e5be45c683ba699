// A profile action resolved to what goes on the wire: holding registers (words) or coils
// at an address. It is also the pre-event state of a Modbus device in the dispatch
// ledger (JSON in dp_ledger.pre): the raw values read before the first write, so putting
// a device back never depends on a scale factor or a profile that changed since.

/** One raw write: holding registers (words) or coils, at a resolved address. */
export interface RawWrite {
  table: "holding" | "coil";
  address: number;
  /** A sub-device's own unit id; absent: the device's unit. */
  unit?: number;
  /**
   * A write-only register. In an action's write: the words that put it back, recorded as
   * its pre-event state without a read. In the ledger's pre-event state: not read back.
   */
  restore?: number[];
  /**
   * A setting the device keeps in flash: each register is written only when the device
   * holds another value (the action's write and the write-back of the pre-event state).
   */
  flash?: boolean;
  words: number[];
  coils: boolean[];
}

export interface ActionParams {
  pct?: number;
  watts?: number;
}

/** Length of a write in registers or coils. */
export function writeLength(w: RawWrite): number {
  return w.table === "coil" ? w.coils.length : w.words.length;
}
