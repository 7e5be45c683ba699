// A simulated brand device served in-process to the gateway's Bus, through the
// simulator's own PDU handler (hw-sim/modbus-pdu.ts): unit tests drive a profile against
// a brand model without sockets. An exception answer throws with its `modbusCode`.
import assert from "node:assert/strict";
import { handlePdu, type RegisterModel } from "../../hw-sim/modbus-pdu.js";
import type { Transport } from "../../src/modbus/transport.js";
import type { Table } from "../../src/modbus/planner.js";

/** The simulated device over its own PDU handler, in-process (function 16 for every write). */
export function transportTo(dev: RegisterModel): Transport {
  const call = (pdu: Buffer) => {
    const r = handlePdu(dev, pdu, () => {});
    if (r[0]! & 0x80) throw Object.assign(new Error(`Modbus exception ${r[1]}`), { modbusCode: r[1] });
    return r;
  };
  return {
    isOpen: true,
    open: async () => {},
    close: async () => {},
    read: async (_unit: number, table: Table, address: number, count: number) => {
      const pdu = Buffer.alloc(5);
      pdu[0] = table === "input" ? 4 : 3;
      pdu.writeUInt16BE(address, 1);
      pdu.writeUInt16BE(count, 3);
      const r = call(pdu);
      return Array.from({ length: count }, (_, i) => r.readUInt16BE(2 + 2 * i));
    },
    writeRegisters: async (_unit: number, address: number, values: number[]) => {
      const pdu = Buffer.alloc(6 + 2 * values.length);
      pdu[0] = 16;
      pdu.writeUInt16BE(address, 1);
      pdu.writeUInt16BE(values.length, 3);
      pdu[5] = 2 * values.length;
      values.forEach((v, i) => pdu.writeUInt16BE(v & 0xffff, 6 + 2 * i));
      call(pdu);
    },
    writeCoils: async () => assert.fail("no coils on this device"),
  };
}
