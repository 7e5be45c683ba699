// A Modbus device that no profile describes: it answers a read of any holding or input
// register with a word that is a fixed function of the seed, the unit and the address
// (as an unfamiliar meter or controller answers with its own data), and refuses every
// write with exception 2. Identification must name nothing on it: answering at an
// address is not being the device a profile expects there.
import { DeviceBase, type DeviceView } from "./device.js";
import { ModbusException, ILLEGAL_ADDRESS } from "../modbus-pdu.js";
import { noise } from "../random.js";

export class UnknownDevice extends DeviceBase {
  readonly model = "unknown";

  constructor(
    spec: { name: string; unit: number },
    private readonly seed: number,
  ) {
    super(spec.name, spec.unit);
  }

  private word(table: number, address: number): number {
    return Math.floor(((noise(this.seed, this.unit * 2 + table, address) + 1) / 2) * 0x10000) & 0xffff;
  }

  override readHolding(address: number, count: number): number[] {
    return Array.from({ length: count }, (_, i) => this.word(0, address + i));
  }
  override readInput(address: number, count: number): number[] {
    return Array.from({ length: count }, (_, i) => this.word(1, address + i));
  }
  override writeHolding(_address: number, _values: number[]): void {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }

  view(): DeviceView {
    return { power_w: 0 };
  }
}
