// The /dr request rules of B4 on the validation itself and on the event store: any
// 8-4-4-4-12 GUID, the event_id kept byte for byte, times that round-trip, a quantity
// above 0 except for restore, and unknown event fields ignored rather than refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { DISPATCH_MIGRATIONS, EventStore, emptyProgress, type EventRow } from "../../src/dispatch/store.js";
import { contentHash, roundTrips, toSpec, validateDispatch } from "../../src/dispatch/request.js";
import { makeTmpDir } from "../support/tmp.js";

const ID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";

function ev(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    event_id: ID,
    start_time: "2030-01-01T10:00:00Z",
    end_time: "2030-01-01T11:00:00Z",
    event_type: "discharge",
    event_quantity: 3,
    event_unit: "kW",
    priority: 10,
    mandatory: false,
    cancelled: false,
    ...over,
  };
}

function problems(...events: Array<Record<string, unknown>>): Array<{ path: string; message: string }> {
  const v = validateDispatch({ mode: "live", event_slots: events });
  return v.ok ? [] : v.details;
}

test("any 8-4-4-4-12 hex GUID is an event_id, whatever its version nibble or case; other shapes are not", () => {
  for (const id of [
    "00000000-0000-0000-0000-000000000000",
    "ABCDEF01-2345-0789-ABCD-EF0123456789",
    "abcdef01-2345-f789-cbcd-ef0123456789",
    ID.toUpperCase(),
  ]) {
    assert.deepEqual(problems(ev({ event_id: id })), [], id);
  }
  for (const id of [
    "{3f2504e0-4f89-11d3-9a0c-0305e82c3301}",
    "3f2504e04f8911d39a0c0305e82c3301",
    "3f2504e0-4f89-11d3-9a0c-0305e82c330",
    "gf2504e0-4f89-11d3-9a0c-0305e82c3301",
    42,
  ]) {
    assert.deepEqual(
      problems(ev({ event_id: id })).map((d) => d.path),
      ["event_slots[0].event_id"],
      String(id),
    );
  }
});

test("the event_id is kept as sent; only the content hash and the duplicate check ignore its case", () => {
  const upper = ID.toUpperCase();
  const v = validateDispatch({ mode: "live", event_slots: [ev({ event_id: upper })] });
  assert.ok(v.ok);
  const spec = toSpec(v.data.event_slots[0], "live");
  assert.equal(spec.event_id, upper);
  const lower = toSpec({ ...v.data.event_slots[0], event_id: ID }, "live");
  assert.equal(contentHash(spec), contentHash(lower), "the same command in either case");
  assert.deepEqual(
    problems(ev({ event_id: upper }), ev({ event_id: ID })).map((d) => d.path),
    ["event_slots[1].event_id"],
  );
});

test("times must be real calendar times: Feb 30, 24:00 and second 60 are refused", () => {
  for (const t of [
    "2030-02-30T12:00:00Z",
    "2030-01-01T24:00:00Z",
    "2030-01-01T23:59:60Z",
    "2030-13-01T00:00:00Z",
    "2030-04-31T00:00:00+00:00",
    "2030-01-01T12:60Z",
  ]) {
    const d = problems(ev({ start_time: t }));
    assert.deepEqual(
      d.map((x) => x.path),
      ["event_slots[0].start_time"],
      t,
    );
    assert.match(d[0].message, /real calendar time/);
  }
  for (const t of ["2028-02-29T00:00:00Z", "2030-01-01T09:59:59.999Z", "2030-01-01T00:00+00:00"])
    assert.deepEqual(problems(ev({ start_time: t })), [], t);
  assert.deepEqual(
    problems(ev({ end_time: "2030-01-01T24:00:00Z" })).map((x) => x.path),
    ["event_slots[0].end_time"],
  );
  assert.equal(roundTrips("2030-02-28T23:59:59Z"), true);
  assert.equal(roundTrips("2030-02-29T00:00:00Z"), false);
});

test("event_quantity must be above 0 except for restore, also beside other problems", () => {
  for (const type of ["charge", "discharge", "shed"]) {
    const d = problems(ev({ event_type: type, event_quantity: 0 }));
    assert.deepEqual(
      d.map((x) => x.path),
      ["event_slots[0].event_quantity"],
      type,
    );
    assert.match(d[0].message, /greater than 0/);
  }
  assert.deepEqual(problems(ev({ event_type: "restore", event_quantity: 0 })), []);
  assert.deepEqual(problems(ev({ event_quantity: 0.001, event_unit: "w" })), []);
  assert.deepEqual(
    problems(ev({ event_quantity: 0, priority: 0 }))
      .map((x) => x.path)
      .sort(),
    ["event_slots[0].event_quantity", "event_slots[0].priority"],
  );
});

test("unknown fields inside an event are dropped and listed, not refused; unknown top-level keys still are", () => {
  const v = validateDispatch({
    mode: "live",
    event_slots: [ev({ site_note: "x", tariff: { a: 1 } }), ev({ event_id: "11111111-1111-1111-1111-111111111111" })],
  });
  assert.ok(v.ok, JSON.stringify(v));
  assert.deepEqual(v.ignored, ["event_slots[0].site_note", "event_slots[0].tariff"]);
  assert.ok(!("site_note" in v.data.event_slots[0]));
  const top = validateDispatch({ mode: "live", event_slots: [ev()], extra: 1 });
  assert.equal(top.ok, false);
});

test("the store keys an event by its lowercased id and keeps the first spelling for the execution response", () => {
  const tmp = makeTmpDir();
  const db = openDatabase(tmp.dir);
  try {
    migrate(db, [DISPATCH_MIGRATIONS]);
    const store = new EventStore(db);
    const v = validateDispatch({ mode: "live", event_slots: [ev({ event_id: ID.toUpperCase() })] });
    assert.ok(v.ok);
    const spec = toSpec(v.data.event_slots[0], "live");
    const row: EventRow = {
      spec,
      content_hash: contentHash(spec),
      state: "scheduled",
      receipt: "accepted",
      started_at: null,
      ended_at: null,
      progress: emptyProgress(),
      result: null,
      created_at: 1,
      updated_at: 1,
    };
    store.put(row);
    assert.equal(store.get(ID)!.spec.event_id, ID.toUpperCase(), "found by any case, spelled as sent");
    assert.equal(store.get(ID.toUpperCase())!.spec.event_id, ID.toUpperCase());
    // A replacement sent in lower case updates the same event and keeps the first spelling.
    const replaced: EventRow = { ...row, spec: { ...spec, event_id: ID, quantity: 4 }, updated_at: 2 };
    store.put(replaced);
    assert.equal(replaced.spec.event_id, ID.toUpperCase(), "the caller's row now carries the stored spelling");
    assert.equal(store.countOpen(), 1);
    assert.equal(store.get(ID)!.spec.quantity, 4);
    replaced.progress.shed_steps.push("relay");
    store.saveProgress(replaced, 3);
    assert.deepEqual(store.get(ID)!.progress.shed_steps, ["relay"]);
  } finally {
    db.close();
    tmp.cleanup();
  }
});
