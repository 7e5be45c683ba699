// The dispatcher on an injected clock against the recording device layer, for unit tests:
// a database of its own (or one passed in, to restart on it), the execution responses it
// would send, and /dr requests built from partial event slots.
import { randomUUID } from "node:crypto";
import { openDatabase, migrate, type Db } from "../../src/storage/db.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { Dispatcher, type ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { dispatchRequest, type DispatchRequest } from "../../src/dispatch/request.js";
import { silentLogger } from "../../src/log.js";
import { FakeClock } from "./fake-clock.js";
import { FakeDevices, type FakeSpec } from "./fake-devices.js";
import { makeTmpDir } from "./tmp.js";

export const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
export const POLL = 1000;

export interface UnitRig {
  d: Dispatcher;
  clock: FakeClock;
  dev: FakeDevices;
  responses: ExecutionResponse[];
  db: Db;
  /** Closes the rig's own database (a crash when the dispatcher was not stopped first). */
  close(): void;
  /** Stops the dispatcher, then closes the rig's own database. */
  cleanup(): void;
}

export function unitRig(
  devices: FakeSpec[],
  opts: { db?: Db; clock?: FakeClock; dev?: FakeDevices; responses?: ExecutionResponse[] } = {},
): UnitRig {
  const tmp = opts.db ? null : makeTmpDir();
  const db = opts.db ?? openDatabase(tmp!.dir);
  if (!opts.db) migrate(db, [DISPATCH_MIGRATIONS]);
  const clock = opts.clock ?? new FakeClock(T0);
  const dev = opts.dev ?? new FakeDevices(devices, clock);
  const responses = opts.responses ?? [];
  const d = new Dispatcher({
    db: () => db,
    devices: dev.directory,
    clock,
    log: silentLogger(),
    pollIntervalMs: POLL,
    respond: (_s, body) => responses.push(body),
  });
  void d.start(); // plans at once; only a put-back at start is awaited
  const close = () => {
    if (tmp) {
      db.close();
      tmp.cleanup();
    }
  };
  return {
    d,
    clock,
    dev,
    responses,
    db,
    close,
    cleanup: () => {
      void d.stop();
      close();
    },
  };
}

/** A /dr request of events from T0 + 10 s to T0 + 70 s, each slot completed from `base`. */
export function drRequest(
  events: Array<Partial<Record<string, unknown>>>,
  base: { event_type: string; event_quantity: number },
  mode: "live" | "test" = "live",
): DispatchRequest {
  return dispatchRequest.parse({
    mode,
    event_slots: events.map((e) => ({
      event_id: randomUUID(),
      start_time: new Date(T0 + 10_000).toISOString(),
      end_time: new Date(T0 + 70_000).toISOString(),
      ...base,
      event_unit: "kW",
      priority: 10,
      mandatory: false,
      cancelled: false,
      ...e,
    })),
  });
}
