import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeRaw, encodeValue, isSunSpecNotImplemented, readingValue, roundReading, scaleValue } from "../../src/modbus/codec.js";
import { planBlocks, rtuGapRegs, TCP_GAP_REGS } from "../../src/modbus/planner.js";
import { parseEndpoint, endpointKey } from "../../src/modbus/endpoint.js";

test("integer and float types decode in both word orders", () => {
  assert.equal(decodeRaw("u16", [0xfffe]), 65534);
  assert.equal(decodeRaw("s16", [0xfffe]), -2);
  assert.equal(decodeRaw("u32", [0x0001, 0x0002]), 65538);
  assert.equal(decodeRaw("u32", [0x0002, 0x0001], "little"), 65538);
  assert.equal(decodeRaw("s32", [0xffff, 0xfffe]), -2);
  assert.equal(decodeRaw("f32", [0x4366, 0x0000]), 230);
  assert.equal(decodeRaw("f32", [0x0000, 0x4366], "little"), 230);
  assert.equal(decodeRaw("f64", encodeValue("f64", 1234.5678)), 1234.5678);
  assert.equal(decodeRaw("u64", [0, 0, 0x0001, 0x0000]), 65536);
  assert.equal(decodeRaw("s64", encodeValue("s64", -5)), -5);
  assert.equal(decodeRaw("string", [0x5369, 0x6d00, 0, 0]), "Sim");
});

test("encode refuses values the type cannot hold", () => {
  assert.deepEqual(encodeValue("s16", -1), [0xffff]);
  assert.deepEqual(encodeValue("u32", 65538), [1, 2]);
  assert.deepEqual(encodeValue("u32", 65538, "little"), [2, 1]);
  assert.throws(() => encodeValue("u16", 70000), /does not fit/);
  assert.throws(() => encodeValue("s16", 1.5), /does not fit/);
});

test("SunSpec not-implemented values are recognised per type", () => {
  assert.ok(isSunSpecNotImplemented("s16", [0x8000]));
  assert.ok(!isSunSpecNotImplemented("s16", [0x7fff]));
  assert.ok(isSunSpecNotImplemented("u16", [0xffff]));
  assert.ok(isSunSpecNotImplemented("acc32", [0, 0]));
  assert.ok(isSunSpecNotImplemented("u32", [0xffff, 0xffff]));
  assert.ok(isSunSpecNotImplemented("sunssf", [0x8000]));
  assert.ok(isSunSpecNotImplemented("f32", [0x7fc0, 0x0000]));
  assert.ok(isSunSpecNotImplemented("string", [0, 0, 0]));
  assert.ok(!isSunSpecNotImplemented("string", [0x4100, 0]));
});

test("scale factors give the nearest decimal, not float noise", () => {
  assert.equal(scaleValue(2297, -1), 229.7);
  assert.equal(scaleValue(4999, -2), 49.99);
  assert.equal(scaleValue(5, 3), 5000);
  assert.equal(scaleValue(1.5, 0, 1000), 1500);
  assert.equal(scaleValue(2297, -1) * 10, 2297);
});

test("float32 readings come out at the 7 significant digits the register carries", () => {
  const f32 = (x: number) => decodeRaw("f32", encodeValue("f32", x)) as number;
  // -1959.853759765625 is a float32 as `make run` showed it; the nearest float32 to -1959.854 comes out the same.
  assert.equal(readingValue(-1959.853759765625, "f32"), -1959.854);
  assert.equal(readingValue(f32(-1959.854), "f32"), -1959.854);
  assert.equal(f32(0.1), 0.10000000149011612);
  assert.equal(readingValue(f32(0.1), "f32"), 0.1);
  assert.equal(readingValue(f32(230.1), "f32"), 230.1);
  assert.equal(readingValue(f32(49.99), "f32"), 49.99);
  assert.equal(readingValue(f32(12345.67), "f32"), 12345.67);
  // More digits than a float32 holds: rounded to 7 (123456.78 is stored as 123456.78125).
  assert.equal(readingValue(f32(123456.78), "f32"), 123456.8);
  // The constant scale keeps the float's digits: kWh x 1000 -> Wh.
  assert.equal(readingValue(f32(12345.67), "f32", 0, 1000), 12345670);
  assert.equal(readingValue(f32(0.1), "f32", 0, 1000), 100);
  // Whole numbers and zero stay as they are; -0 is 0.
  assert.equal(readingValue(f32(230), "f32"), 230);
  assert.equal(readingValue(f32(-4975), "f32"), -4975);
  assert.ok(Object.is(readingValue(-0, "f32"), 0));
  // float64 carries 15 digits.
  assert.equal(readingValue(0.1 + 0.2, "f64"), 0.3);
  assert.equal(readingValue(1234.5678, "f64"), 1234.5678);
});

test("huge and tiny float32 magnitudes keep 7 significant digits", () => {
  const f32 = (x: number) => decodeRaw("f32", encodeValue("f32", x)) as number;
  assert.equal(readingValue(f32(3.4028234663852886e38), "f32"), 3.402823e38);
  assert.equal(readingValue(f32(-1e30), "f32"), -1e30);
  assert.equal(readingValue(f32(1e-30), "f32"), 1e-30);
  assert.equal(readingValue(f32(1.4e-45), "f32"), 1.401298e-45, "the smallest subnormal");
  assert.equal(readingValue(f32(6.02214e23), "f32"), 6.02214e23);
});

test("scaled integers carry the decimals of their scale factor and constant scale, not float noise", () => {
  // Each of these comes out of scaleValue with noise (0.006999999999999999, 16100.000000000002, ...).
  assert.equal(scaleValue(7, -1, 0.01), 0.006999999999999999);
  assert.equal(readingValue(7, "u16", -1, 0.01), 0.007);
  assert.equal(readingValue(9, "u16", -1, 0.01), 0.009);
  assert.equal(readingValue(161, "u16", -1, 1000), 16100);
  assert.equal(readingValue(201, "s16", -2, 1000), 2010);
  assert.equal(readingValue(3, "u16", 0, 0.3), 0.9);
  assert.equal(readingValue(13, "u16", 0, 1.8), 23.4);
  assert.equal(readingValue(13, "u32", -2, 0.1), 0.013);
  // value x 10^-2
  assert.equal(readingValue(1234, "s16", -2), 12.34);
  assert.equal(readingValue(-1234, "s16", -2), -12.34);
  assert.equal(readingValue(4999, "u16", -2), 49.99);
  assert.equal(readingValue(2297, "u16", -1), 229.7);
  assert.equal(readingValue(5, "u16", 3), 5000);
  assert.equal(roundReading(12.340000000000002, "s32", -2), 12.34);
  assert.equal(roundReading(12.340000000000002, "u16", 0, 0.01), 12.34);
  // A scale without a short decimal form: 15 significant digits.
  assert.equal(readingValue(3, "u16", 0, 1 / 3), 1);
  // Counters beyond 2^53 stay as the double they decoded to; big exact ones are untouched.
  assert.equal(readingValue(2 ** 60, "u64"), 2 ** 60);
  assert.equal(readingValue(4294967295, "acc32"), 4294967295);
  assert.equal(readingValue(Number.MAX_SAFE_INTEGER, "acc64", -2), Number.MAX_SAFE_INTEGER / 100);
});

test("NaN and Infinity pass the rounding unchanged (the driver drops them before, as it always did)", () => {
  assert.ok(Number.isNaN(readingValue(NaN, "f32")));
  assert.ok(Number.isNaN(roundReading(NaN, "u16", -2)));
  assert.equal(readingValue(Infinity, "f32"), Infinity);
  assert.equal(readingValue(-Infinity, "f64", 0, 1000), -Infinity);
  assert.equal(roundReading(Infinity, "s32", -1), Infinity);
});

test("the planner merges neighbours, bridges cheap gaps, splits at the read limit", () => {
  const r = (address: number, count = 1) => ({ table: "holding" as const, address, count });
  const blocks = planBlocks([r(100), r(102, 2), r(110), r(300), r(40000, 2)], { maxRegs: 125, maxGap: 10 });
  assert.deepEqual(
    blocks.map((b) => [b.address, b.count]),
    [
      [100, 11],
      [300, 1],
      [40000, 2],
    ],
  );
  assert.deepEqual(blocks[0].members, [0, 1, 2]);
  const limited = planBlocks([r(0, 2), r(60, 2), r(78, 2)], { maxRegs: 50, maxGap: 100 });
  assert.deepEqual(
    limited.map((b) => [b.address, b.count]),
    [
      [0, 2],
      [60, 20],
    ],
  );
});

test("the planner never reads across an unreadable range, and keeps tables apart", () => {
  const blocks = planBlocks(
    [
      { table: "input", address: 0, count: 2 },
      { table: "input", address: 10, count: 2 },
      { table: "holding", address: 2, count: 2 },
    ],
    { maxRegs: 125, maxGap: 50, unreadable: [{ table: "input", address: 4, count: 2 }] },
  );
  assert.deepEqual(
    blocks.map((b) => [b.table, b.address, b.count]),
    [
      ["holding", 2, 2],
      ["input", 0, 2],
      ["input", 10, 2],
    ],
  );
});

test("the gap worth bridging follows the wire: more at 9600 baud with turnaround than at 115200", () => {
  assert.ok(rtuGapRegs(9600) >= 12);
  assert.ok(rtuGapRegs(115200, 10, 5) > rtuGapRegs(9600, 10, 5), "turnaround is worth more characters at high baud");
  assert.ok(TCP_GAP_REGS >= 32);
});

test("endpoints parse and name their bus", () => {
  assert.deepEqual(parseEndpoint("tcp://127.0.0.1:502"), { kind: "tcp", host: "127.0.0.1", port: 502 });
  assert.deepEqual(parseEndpoint("rtu:/dev/ttyUSB0?baud=19200&parity=even"), {
    kind: "rtu",
    path: "/dev/ttyUSB0",
    baud: 19200,
    parity: "even",
    stopBits: 1,
  });
  assert.equal(endpointKey(parseEndpoint("rtu:/dev/ttyUSB0")), "rtu:/dev/ttyUSB0");
  assert.throws(() => parseEndpoint("udp://x:1"), /bad endpoint/);
  assert.throws(() => parseEndpoint("rtu:/dev/x?baud=12"), /baud/);
});
