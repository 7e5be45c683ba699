// Modbus PDU handling for simulated devices: decodes a request PDU, asks the device's
// register model, and encodes the response or the exception. Framing (MBAP, RTU) is
// done by the servers; this module knows function codes only.

export class ModbusException extends Error {
  constructor(readonly code: number) {
    super(`modbus exception ${code}`);
  }
}

export const ILLEGAL_FUNCTION = 1;
export const ILLEGAL_ADDRESS = 2;
export const ILLEGAL_VALUE = 3;
export const DEVICE_FAILURE = 4;

/** What a simulated device exposes to the bus. Unimplemented tables throw ILLEGAL_FUNCTION/ADDRESS. */
export interface RegisterModel {
  maxReadRegs: number;
  readHolding(address: number, count: number): number[];
  readInput(address: number, count: number): number[];
  writeHolding(address: number, values: number[]): void;
  readCoils(address: number, count: number): boolean[];
  writeCoils(address: number, values: boolean[]): void;
}

export interface WriteRecord {
  fn: number;
  address: number;
  values: number[];
}

export function exceptionPdu(fn: number, code: number): Buffer {
  return Buffer.from([(fn | 0x80) & 0xff, code]);
}

/** Expected length of a request PDU from its first bytes, or -1 when unknown, 0 when more bytes are needed. */
export function requestPduLength(pdu: Buffer, offset = 0): number {
  if (pdu.length - offset < 1) return 0;
  const fn = pdu[offset];
  switch (fn) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
      return 5;
    case 15:
    case 16:
      return pdu.length - offset < 6 ? 0 : 6 + pdu.readUInt8(offset + 5);
    default:
      return -1;
  }
}

/**
 * Runs one request PDU against a device. `onWrite` sees each accepted write (for the
 * write log); `applyWrites` false acknowledges writes without applying them.
 */
export function handlePdu(dev: RegisterModel, pdu: Buffer, onWrite: (w: WriteRecord) => void, applyWrites = true): Buffer {
  const fn = pdu[0] ?? 0; // an empty PDU: function 0, which answers ILLEGAL_FUNCTION
  try {
    switch (fn) {
      case 1:
      case 2: {
        const [addr, count] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3)];
        if (count < 1 || count > 2000) throw new ModbusException(ILLEGAL_VALUE);
        const bits = dev.readCoils(addr, count);
        const out = Buffer.alloc(2 + Math.ceil(count / 8));
        out[0] = fn;
        out[1] = out.length - 2;
        bits.forEach((b, i) => {
          if (b) out[2 + (i >> 3)] = out.readUInt8(2 + (i >> 3)) | (1 << (i & 7));
        });
        return out;
      }
      case 3:
      case 4: {
        const [addr, count] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3)];
        if (count < 1 || count > 125 || count > dev.maxReadRegs) throw new ModbusException(ILLEGAL_VALUE);
        if (addr + count > 0x10000) throw new ModbusException(ILLEGAL_ADDRESS);
        const regs = fn === 3 ? dev.readHolding(addr, count) : dev.readInput(addr, count);
        const out = Buffer.alloc(2 + count * 2);
        out[0] = fn;
        out[1] = count * 2;
        regs.forEach((r, i) => out.writeUInt16BE(r & 0xffff, 2 + i * 2));
        return out;
      }
      case 5: {
        const [addr, raw] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3)];
        if (raw !== 0xff00 && raw !== 0x0000) throw new ModbusException(ILLEGAL_VALUE);
        dev.readCoils(addr, 1); // address check
        if (applyWrites) dev.writeCoils(addr, [raw === 0xff00]);
        onWrite({ fn, address: addr, values: [raw === 0xff00 ? 1 : 0] });
        return Buffer.from(pdu.subarray(0, 5));
      }
      case 15: {
        const [addr, count, bytes] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3), pdu.readUInt8(5)];
        if (count < 1 || count > 1968 || bytes !== Math.ceil(count / 8) || pdu.length < 6 + bytes) throw new ModbusException(ILLEGAL_VALUE);
        const values = Array.from({ length: count }, (_, i) => (pdu.readUInt8(6 + (i >> 3)) & (1 << (i & 7))) !== 0);
        dev.readCoils(addr, count);
        if (applyWrites) dev.writeCoils(addr, values);
        onWrite({ fn, address: addr, values: values.map((v) => (v ? 1 : 0)) });
        return Buffer.from(pdu.subarray(0, 5));
      }
      case 6: {
        const [addr, value] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3)];
        if (applyWrites) dev.writeHolding(addr, [value]);
        else dev.readHolding(addr, 1);
        onWrite({ fn, address: addr, values: [value] });
        return Buffer.from(pdu.subarray(0, 5));
      }
      case 16: {
        const [addr, count, bytes] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3), pdu.readUInt8(5)];
        if (count < 1 || count > 123 || bytes !== count * 2 || pdu.length < 6 + bytes) throw new ModbusException(ILLEGAL_VALUE);
        const values = Array.from({ length: count }, (_, i) => pdu.readUInt16BE(6 + i * 2));
        if (applyWrites) dev.writeHolding(addr, values);
        else dev.readHolding(addr, count);
        onWrite({ fn, address: addr, values });
        return Buffer.from(pdu.subarray(0, 5));
      }
      default:
        throw new ModbusException(ILLEGAL_FUNCTION);
    }
  } catch (e) {
    if (e instanceof ModbusException) return exceptionPdu(fn, e.code);
    if (e instanceof RangeError) return exceptionPdu(fn, ILLEGAL_VALUE); // truncated PDU
    return exceptionPdu(fn, DEVICE_FAILURE);
  }
}

/** A model with no table at all answers ILLEGAL_ADDRESS (the function exists, the address does not). */
export function noTable(): never {
  throw new ModbusException(ILLEGAL_ADDRESS);
}

/** Modbus RTU CRC-16 (poly 0xA001, init 0xFFFF), appended low byte first. */
const CRC_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xa001 : c >>> 1;
    t[i] = c;
  }
  return t;
})();

export function crc16(buf: Buffer, end = buf.length): number {
  let crc = 0xffff;
  // `& 0xff` indexes inside the 256-entry table
  for (let i = 0; i < end; i++) crc = (crc >>> 8) ^ CRC_TABLE[(crc ^ buf.readUInt8(i)) & 0xff]!;
  return crc;
}

/**
 * Splits RTU frames (unit, PDU, CRC) off the front of a byte stream. Frames with a bad
 * CRC or an unknown function are dropped and counted, as a device ignores them.
 */
export function takeRtuFrames(buf: Buffer): { frames: Buffer[]; rest: Buffer; bad: number } {
  const frames: Buffer[] = [];
  let bad = 0;
  for (;;) {
    if (buf.length < 2) break;
    const len = requestPduLength(buf, 1);
    if (len === 0) break;
    if (len < 0) {
      bad++;
      buf = Buffer.alloc(0);
      break;
    }
    const total = 1 + len + 2;
    if (buf.length < total) break;
    const frame = buf.subarray(0, total);
    buf = buf.subarray(total);
    if (crc16(frame, total - 2) !== frame.readUInt16LE(total - 2)) bad++;
    else frames.push(frame);
  }
  return { frames, rest: buf, bad };
}

/** An RTU response frame: unit, PDU, CRC (corrupted on request, for the crc fault). */
export function rtuFrame(unit: number, pdu: Buffer, corrupt = false): Buffer {
  const out = Buffer.alloc(1 + pdu.length + 2);
  out[0] = unit;
  pdu.copy(out, 1);
  const crc = crc16(out, out.length - 2);
  out.writeUInt16LE(corrupt ? crc ^ 0xa5a5 : crc, out.length - 2);
  return out;
}
