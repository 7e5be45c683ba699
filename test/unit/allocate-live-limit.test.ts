// Every allocation uses the battery's live limits where it publishes them; charge and
// discharge may differ, and a share above a limit is never planned.
import { test } from "node:test";
import assert from "node:assert/strict";
import { allocateProportional } from "../../src/dispatch/allocate.js";
import { battery, planned } from "../support/fake-devices.js";

function limited(id: string, max: number, charge: number, discharge: number) {
  const b = battery(id, max);
  return { ...b, metrics: { ...b.metrics, max_charge_power_w: charge, max_discharge_power_w: discharge } };
}

test("a 6 kW discharge over two 10 kW inverters, one battery limited to 2.5 kW: 2.5 kW there, the rest elsewhere", () => {
  const s = allocateProportional("discharge", 6000, planned(limited("a", 10_000, 10_000, 2500), battery("b", 10_000)));
  assert.deepEqual(
    s.map((x) => Math.round(x.watts)),
    [2500, 3500],
  );
});

test("charge and discharge limits differ: each direction takes its own", () => {
  const one = () => planned(limited("a", 10_000, 3000, 5000));
  assert.equal(Math.round(allocateProportional("charge", 8000, one())[0]!.watts), 3000);
  assert.equal(Math.round(allocateProportional("discharge", 8000, one())[0]!.watts), 5000);
});

test("no live limit published: the rating bounds the share", () => {
  assert.equal(Math.round(allocateProportional("discharge", 8000, planned(battery("a", 6000)))[0]!.watts), 6000);
});
