// A SunSpec device's chain of models, walked one header read per model from the marker at
// `base` (some devices omit the end model's length): pairing reads every model it yields,
// identification tells a device's role from the ids it yields before a read fails.
import { SitegateError } from "../../errors.js";

export interface SunSpecModelInfo {
  id: number;
  /** Address of the model id register. */
  address: number;
  length: number;
}

/** At most this many models are walked. */
const MAX_MODELS = 64;

/**
 * Word i of an answer. A device that answered fewer words than were asked is refused with
 * MODBUS_BAD_RESPONSE, never read as a value that was not sent.
 */
export function wordAt(words: readonly number[], i: number, what: string): number {
  const w = words[i];
  if (w === undefined)
    throw new SitegateError("MODBUS_BAD_RESPONSE", `${what}: the answer holds ${words.length} word(s), word ${i + 1} is missing`);
  return w;
}

/** The models after the marker at `base`, up to the end model (id 0xFFFF, or 0); a failed read throws. */
export async function* sunSpecChain(
  unit: number,
  base: number,
  readHeader: (address: number, count: number) => Promise<readonly number[]>,
): AsyncGenerator<SunSpecModelInfo> {
  let addr = base + 2;
  for (let n = 0; n < MAX_MODELS && addr < 0xffff; n++) {
    const header = await readHeader(addr, addr + 1 <= 0xffff ? 2 : 1);
    const what = `unit ${unit} SunSpec model header at ${addr}`;
    const id = wordAt(header, 0, what);
    if (id === 0xffff || id === 0) return;
    const length = wordAt(header, 1, what);
    yield { id, address: addr, length };
    addr += 2 + length;
  }
}
