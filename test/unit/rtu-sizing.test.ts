// The planner's gap worth reading through, checked against the wire time of whole
// requests (the full-bus bench's line model): reading through the gap it bridges costs no
// more than one more request would, one register more costs more, at every framing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { planBlocks, rtuGapRegs } from "../../src/modbus/planner.js";
import { coalescing, requestLineMs } from "../bench/rtu-bus.bench.js";

const FRAMINGS: Array<[number, number]> = [
  [9600, 10],
  [9600, 11],
  [19200, 11],
  [38400, 11],
  [57600, 10],
  [115200, 10],
];

test("the planner bridges exactly the gaps that cost less than another request, at every baud", () => {
  for (const [baud, bits] of FRAMINGS) {
    const g = rtuGapRegs(baud, bits, 5);
    const read = { table: "input" as const, count: 10 };
    // Two reads of 10 registers against one read through a gap of g (or g + 1) registers.
    const two = 2 * requestLineMs(read, baud, bits, 5);
    const through = (gap: number) => requestLineMs({ table: "input", count: 20 + gap }, baud, bits, 5);
    assert.ok(
      through(g) <= two,
      `${baud} baud ${bits} bits: bridging ${g} registers (${through(g).toFixed(2)} ms) should not cost more than two requests (${two.toFixed(2)} ms)`,
    );
    assert.ok(
      through(g + 1) > two,
      `${baud} baud ${bits} bits: bridging ${g + 1} registers (${through(g + 1).toFixed(2)} ms) should cost more than two requests (${two.toFixed(2)} ms)`,
    );
  }
});

test("above 19200 baud the fixed 1.75 ms silences make a request dearer: the gap grows", () => {
  // At 115200 8N1 one character is 0.087 ms: two 1.75 ms silences are ~40 characters, not 7.
  assert.ok(rtuGapRegs(115200, 10, 5) >= 54, `got ${rtuGapRegs(115200, 10, 5)}`);
  assert.equal(rtuGapRegs(9600, 10, 5), 12);
});

test("coalescing counts the registers needed once and the registers read", () => {
  const ranges = [
    { table: "input" as const, address: 0, count: 2 },
    { table: "input" as const, address: 1, count: 2 },
    { table: "input" as const, address: 10, count: 2 },
  ];
  const blocks = planBlocks(ranges, { maxRegs: 80, maxGap: 12 });
  assert.deepEqual(coalescing(ranges, blocks), { needed: 5, read: 12 });
  // 8 request + 5 + 24 data characters at 9600 8N1, two 3.5-character silences, 5 ms turnaround.
  assert.equal(requestLineMs(blocks[0], 9600, 10, 5).toFixed(3), (((8 + 5 + 24 + 7) * 10 * 1000) / 9600 + 5).toFixed(3));
});
