// validateDispatch checks a request by hand first (plainValid) and asks zod only when that
// finds anything amiss (src/dispatch/request.ts). The hand check must never take a request
// zod refuses, and what it takes must be zod's data to the byte (key order included): over
// thousands of generated requests, valid ones and ones with one or more mutations, the
// answer is the zod schema's.
import { test } from "node:test";
import assert from "node:assert/strict";
import { dispatchRequest, plainValid, validateDispatch } from "../../src/dispatch/request.js";
import { issuesToDetails } from "../../src/util/zod-issues.js";
import { seeded } from "../support/seeded.js";

const HOUR = 3_600_000;
const BASE = Date.UTC(2026, 5, 1, 12);

type Json = Record<string, unknown>;

function validEvent(r: ReturnType<typeof seeded>, i: number): Json {
  const start = BASE + r.int(48) * HOUR + r.int(60) * 60_000;
  const hex = (n: number) => Array.from({ length: n }, () => r.pick("0123456789abcdefABCDEF".split(""))).join("");
  return {
    event_id: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`,
    start_time: new Date(start).toISOString(),
    end_time: r.int(2) ? new Date(start + 900_000).toISOString().replace(".000Z", "+00:00") : new Date(start + 900_000).toISOString(),
    event_type: r.pick(["charge", "discharge", "shed", "restore"]),
    event_quantity: r.pick([2.5, 1, 0.001, 1e9, 3000, 7]),
    event_unit: r.pick(["w", "kW", "MW"]),
    priority: 1 + ((i * 7) % 99),
    mandatory: r.int(2) === 1,
    cancelled: r.int(5) === 0,
  };
}

/** Values that break a field, or come close to its edge from either side. */
const ODD: unknown[] = [
  null,
  "",
  0,
  -0,
  -1,
  1.5,
  99,
  100,
  1e9,
  1e9 + 1,
  true,
  "true",
  [],
  {},
  "kw",
  "W",
  "pv_limit",
  "2026-02-30T10:00:00Z",
  "2026-06-01T24:00:00Z",
  "2026-06-01T10:00:00+01:00",
  "2026-06-01T10:00:00.1234567890Z",
  "2024-02-29T10:00:00Z",
  "2026-06-01T10:00Z",
  // After every generated start: only the spelling decides.
  "2026-12-01T10:00:00+01:00",
  "2026-12-01T10:00:00.1234567890Z",
  "2026-12-01T10:00:00.123456789Z",
  "2026-12-01T10:00Z",
  "2026-12-01 10:00:00Z",
  "2026-12-01T10:00:00z",
  "2026-12-31T23:59:60Z",
  "+2026-12-01T10:00:00Z",
  "12345678-1234-1234-1234-12345678901g",
  "12345678-1234-1234-1234-1234567890ab",
];

const FIELDS = ["event_id", "start_time", "end_time", "event_type", "event_quantity", "event_unit", "priority", "mandatory", "cancelled"];

function mutate(r: ReturnType<typeof seeded>, body: Json): void {
  const slots = body.event_slots as Json[];
  if (!Array.isArray(slots) || slots.length === 0) return;
  const picked: unknown = slots[r.int(slots.length)];
  const e = (typeof picked === "object" && picked !== null ? picked : {}) as Json;
  switch (r.int(9)) {
    case 0:
      e[r.pick(FIELDS)] = r.pick(ODD);
      break;
    case 1:
      delete e[r.pick(FIELDS)];
      break;
    case 2:
      e.extra_field = r.pick(ODD); // ignored, not refused
      break;
    case 3:
      if (slots.length > 1 && typeof slots[1] === "object" && slots[1] !== null && typeof slots[0] === "object" && slots[0] !== null)
        slots[1].event_id = String(slots[0].event_id).toUpperCase(); // a repeat, in another case
      break;
    case 4:
      e.event_quantity = 0; // only a restore may
      break;
    case 5:
      e.end_time = e.start_time; // not later than start
      break;
    case 6:
      body[r.pick(["mode", "extra"])] = r.pick(["live", "test", "LIVE", null, 1]);
      break;
    case 7:
      body.event_slots = r.pick([[], Array.from({ length: 101 }, (_, i) => validEvent(r, i)), "x", [null], [[]]]);
      break;
    default:
      slots[r.int(slots.length)] = r.pick(ODD) as Json;
  }
}

/** Every odd value in every field of the second event of a valid request, then generated requests with random mutations. */
function* bodies(): Generator<Json> {
  const r = seeded(20261128);
  for (const field of FIELDS)
    for (const odd of ODD) {
      const slots = [validEvent(r, 0), { ...validEvent(r, 1), [field]: odd }];
      yield { mode: "live", event_slots: slots };
    }
  for (let n = 0; n < 2000; n++) {
    const body: Json = { mode: r.pick(["live", "test"]), event_slots: Array.from({ length: 1 + r.int(12) }, (_, i) => validEvent(r, i)) };
    const mutations = n % 4 === 0 ? 0 : 1 + r.int(3);
    for (let m = 0; m < mutations; m++) mutate(r, body);
    yield body;
  }
}

test("the hand check takes exactly what zod takes, with zod's data; everything else gets zod's details", () => {
  let fast = 0;
  let valid = 0;
  for (const body of bodies()) {
    const zod = dispatchRequest.safeParse(body);
    const hand = plainValid(body);
    const got = validateDispatch(body);
    if (hand) {
      fast++;
      assert.ok(zod.success, `the hand check took a request zod refuses: ${JSON.stringify(body)}`);
      assert.equal(JSON.stringify(hand), JSON.stringify(zod.data), JSON.stringify(body));
    }
    if (zod.success) {
      valid++;
      assert.ok(got.ok, JSON.stringify(body));
      assert.equal(JSON.stringify(got.data), JSON.stringify(zod.data));
    } else {
      assert.ok(!got.ok, `accepted a request zod refuses: ${JSON.stringify(body)}`);
      for (const d of issuesToDetails(zod.error.issues)) assert.ok(got.details.some((x) => x.path === d.path && x.message === d.message));
    }
  }
  // The generator makes both kinds, and every valid request without an unknown field takes the hand check.
  assert.ok(valid > 500 && valid < 2000, `valid ${valid}`);
  assert.ok(fast >= 500, `hand-checked ${fast}`);
  process.stderr.write(`${valid} valid of ${9 * ODD.length + 2000}, ${fast} taken by the hand check\n`);
});

test("the hand check leaves to zod what it does not check itself: a request it refuses is still answered by zod", () => {
  // Unknown event fields are dropped by both, so the hand check takes them too.
  const e = { ...validEvent(seeded(1), 0), note: "x" };
  const body = { mode: "live", event_slots: [e] };
  const hand = plainValid(body);
  assert.ok(hand);
  assert.equal(JSON.stringify(hand), JSON.stringify(dispatchRequest.parse(body)));
  const got = validateDispatch(body);
  assert.ok(got.ok);
  assert.deepEqual(got.ignored, ["event_slots[0].note"]);
  // An unknown top-level key: zod's strict refusal, with its path.
  const extra = validateDispatch({ ...body, extra: 1 });
  assert.ok(!extra.ok);
  assert.deepEqual(extra.details, [{ path: "extra", message: "unknown key" }]);
});
