// The glue every Eastron meter model shares (the SDM630 of ./sdm630.ts, the SDM72D-M and
// SDM120 of ./brands/eastron.ts): measurements as IEEE 754 float32 input registers
// (function 4, high word first) by even address, the meter id (0x0014) and baud code
// (0x001C) as float holding registers, the serial as a U32 at 0xFC00, settings refused
// (they need the meter's password, not simulated), reads over 80 registers refused. Which
// register holds what is each model's own reading of its document (`value`, `identity`).
import { DeviceBase } from "./device.js";
import { ModbusException, ILLEGAL_ADDRESS, ILLEGAL_VALUE } from "../modbus-pdu.js";
import type { SiteModel } from "../site-model.js";
import { hashString } from "../random.js";

export abstract class EastronMeterBase extends DeviceBase {
  protected readonly serial: number;
  /** Test hook: every float input register reads NaN, no reading available. */
  protected nan = false;

  constructor(
    spec: { name: string; unit: number; serial?: number },
    protected readonly site: SiteModel,
  ) {
    super(spec.name, spec.unit);
    this.maxReadRegs = 80;
    this.serial = spec.serial ?? ((hashString(spec.name) ^ site.seed) >>> 0) % 100_000_000;
  }

  /** Float value by even PDU address, or undefined when the document has no such register. */
  protected abstract value(addr: number): number | undefined;

  /** The model's holding registers beyond the meter id, the baud code and the serial. */
  protected identity(_float: (a: number, v: number) => void, _word: (a: number, v: number) => void): void {}

  override readInput(address: number, count: number): number[] {
    this.site.advance();
    const out: number[] = [];
    const buf = Buffer.alloc(4);
    for (let a = address; a < address + count; a++) {
      const base = a & ~1;
      const v = this.value(base);
      if (v === undefined) throw new ModbusException(ILLEGAL_ADDRESS);
      buf.writeFloatBE(this.nan ? NaN : v, 0);
      out.push(buf.readUInt16BE(a === base ? 0 : 2));
    }
    return out;
  }

  override readHolding(address: number, count: number): number[] {
    const regs = new Map<number, number>();
    const f = Buffer.alloc(4);
    const putFloat = (a: number, v: number) => {
      f.writeFloatBE(v, 0);
      regs.set(a, f.readUInt16BE(0));
      regs.set(a + 1, f.readUInt16BE(2));
    };
    const putWord = (a: number, v: number) => regs.set(a, v);
    putFloat(0x14, this.unit); // meter id (Modbus address)
    putFloat(0x1c, 2); // baud code 2 = 9600
    putWord(0xfc00, (this.serial >>> 16) & 0xffff);
    putWord(0xfc01, this.serial & 0xffff);
    this.identity(putFloat, putWord);
    const out: number[] = [];
    for (let a = address; a < address + count; a++) {
      const v = regs.get(a);
      if (v === undefined) throw new ModbusException(ILLEGAL_ADDRESS);
      out.push(v);
    }
    return out;
  }

  override writeHolding(address: number, _values: number[]): void {
    // Settings need the meter's password and are not simulated; the addresses exist.
    throw new ModbusException(address === 0x14 || address === 0x1c ? ILLEGAL_VALUE : ILLEGAL_ADDRESS);
  }
}
