// The dispatch request (spec 2.3, DESIGN B4) as one zod schema, and the normal form an
// event is stored and compared in: watts, epoch milliseconds, and a content hash that
// decides whether a repeated event_id is "the same command".
import { hash } from "node:crypto";
import { z } from "zod";
import { issuesToDetails } from "../util/zod-issues.js";
import { SitegateError, type ErrorDetail } from "../errors.js";

export const MAX_EVENTS_PER_REQUEST = 100;
/** How far after its receipt an event may start (B4). */
export const MAX_START_AHEAD_DAYS = 31;
export const MAX_START_AHEAD_MS = MAX_START_AHEAD_DAYS * 86_400_000;
/** How long an event may last: end_time at most this after start_time (B4). */
export const MAX_EVENT_HOURS = 24;
export const MAX_EVENT_MS = MAX_EVENT_HOURS * 3_600_000;
/** Events not yet ended (scheduled or running) per site (B4): what the scheduler may have to hold. */
export const MAX_OPEN_EVENTS = 10_000;
import { EVENT_TYPES, UNITS, type EventType, type EventUnit } from "../model/vocabulary.js";

const CALENDAR = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/;
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The calendar fields of a UTC time are a real time: no Feb 30, no 24:00, no second 60.
 * By range (proleptic Gregorian leap years, as Date counts them), without a Date object:
 * it runs twice per time of every event of a request.
 */
export function roundTrips(s: string): boolean {
  const m = CALENDAR.exec(s);
  return m !== null && calendarOk(m);
}

/** The calendar fields (year, month, day, hour, minute, second?) at groups 1-6 are a real time. */
function calendarOk(m: RegExpExecArray): boolean {
  const [, ys = "", mos = "", ds = "", hs = "", mins = "", secs] = m;
  const y = +ys;
  const mo = +mos;
  const d = +ds;
  const days = MONTH_DAYS[mo - 1];
  if (days === undefined || d < 1 || +hs > 23 || +mins > 59 || (secs !== undefined && +secs > 59)) return false;
  const leap = mo === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  return d <= days + (leap ? 1 : 0);
}

/** Its groups are CALENDAR's: one match both checks the form and gives the fields. */
const UTC_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|\+00:00)$/;
const realTime = (s: string) => roundTrips(s) && Number.isFinite(Date.parse(s));

/** The epoch ms of a UTC time as the request may carry it (utcTime's rules: the form, a real time), else null. One match, one parse. */
function utcMs(s: unknown): number | null {
  if (typeof s !== "string") return null;
  const m = UTC_TIME.exec(s);
  if (m === null || !calendarOk(m)) return null;
  const ms = Date.parse(s);
  return Number.isFinite(ms) ? ms : null;
}

/** ISO 8601 in UTC: `Z` or `+00:00`, and a time that exists (B4). */
const utcTime = z
  .string({ error: "required" })
  .regex(UTC_TIME, "must be ISO 8601 UTC, e.g. 2026-01-01T12:00:00Z (offset Z or +00:00)")
  .refine(realTime, "is not a real calendar time (such as February 30 or 24:00)");

/** Any 8-4-4-4-12 hex GUID, whatever its version and variant nibbles; the case is kept as sent. */
export const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * An event of the request. Fields the spec does not name are dropped (and logged at
 * debug by the caller), not refused: a partner adding a field must not stop dispatch.
 */
export const dispatchEvent = z.object({
  event_id: z.string({ error: "must be a GUID" }).regex(GUID, "must be a GUID (8-4-4-4-12 hex digits)"),
  start_time: utcTime,
  end_time: utcTime,
  event_type: z.enum(EVENT_TYPES, { error: `must be one of ${EVENT_TYPES.join(", ")}` }),
  event_quantity: z.number({ error: "must be a number" }).finite().nonnegative("must not be negative").max(1e9, "is too large"),
  event_unit: z.enum(Object.keys(UNITS) as [EventUnit, ...EventUnit[]], { error: "must be one of w, kW, MW" }),
  priority: z
    .number({ error: "must be an integer 1..99" })
    .int("must be an integer 1..99")
    .min(1, "must be 1..99")
    .max(99, "must be 1..99"),
  mandatory: z.boolean({ error: "must be true or false" }),
  cancelled: z.boolean({ error: "must be true or false" }),
});

const EVENT_FIELDS = new Set(Object.keys(dispatchEvent.shape));
const QUANTITY_ZERO = "must be greater than 0 (only a restore may be 0)";

/** Only a restore may ask for nothing; the check needs event_type, so it is not a field rule. */
function zeroQuantity(e: { event_type?: unknown; event_quantity?: unknown }): boolean {
  return e.event_quantity === 0 && typeof e.event_type === "string" && e.event_type !== "restore";
}

export const dispatchRequest = z
  .strictObject({
    mode: z.enum(["test", "live"], { error: "must be test or live" }),
    event_slots: z
      .array(dispatchEvent, { error: "must be an array of events" })
      .min(1, "must hold at least one event")
      .max(MAX_EVENTS_PER_REQUEST, `at most ${MAX_EVENTS_PER_REQUEST} events per request`),
  })
  .superRefine((req, ctx) => {
    const seen = new Map<string, number>();
    req.event_slots.forEach((e, i) => {
      if (roundTrips(e.start_time) && roundTrips(e.end_time) && Date.parse(e.end_time) <= Date.parse(e.start_time)) {
        ctx.addIssue({ code: "custom", path: ["event_slots", i, "end_time"], message: "must be later than start_time" });
      }
      if (zeroQuantity(e)) ctx.addIssue({ code: "custom", path: ["event_slots", i, "event_quantity"], message: QUANTITY_ZERO });
      const first = seen.get(e.event_id.toLowerCase());
      if (first !== undefined)
        ctx.addIssue({ code: "custom", path: ["event_slots", i, "event_id"], message: `repeats event_slots[${first}].event_id` });
      else seen.set(e.event_id.toLowerCase(), i);
    });
  });

export type DispatchRequest = z.infer<typeof dispatchRequest>;

/**
 * The whole request's problems at once, one path each: zod's own, plus repeated
 * event_ids and zero quantities (which the request-level refinement skips when an event
 * also has other problems). `ignored` lists the fields of events that were dropped.
 */
export function validateDispatch(
  body: unknown,
): { ok: true; data: DispatchRequest; ignored: string[] } | { ok: false; details: ErrorDetail[] } {
  const slots = (body as { event_slots?: unknown } | null)?.event_slots;
  const valid = plainValid(body);
  if (valid) return { ok: true, data: valid, ignored: ignoredFields(slots) };
  const r = dispatchRequest.safeParse(body);
  if (r.success) return { ok: true, data: r.data, ignored: ignoredFields(slots) };
  const details = issuesToDetails(r.error.issues);
  if (Array.isArray(slots)) {
    const seen = new Map<string, number>();
    slots.forEach((e, i) => {
      if (typeof e !== "object" || e === null) return;
      const ev = e as { event_id?: unknown; event_type?: unknown; event_quantity?: unknown };
      const qPath = `event_slots[${i}].event_quantity`;
      if (zeroQuantity(ev) && !details.some((d) => d.path === qPath)) details.push({ path: qPath, message: QUANTITY_ZERO });
      const id = ev.event_id;
      if (typeof id !== "string") return;
      const first = seen.get(id.toLowerCase());
      const path = `event_slots[${i}].event_id`;
      if (first !== undefined && !details.some((d) => d.path === path))
        details.push({ path, message: `repeats event_slots[${first}].event_id` });
      else if (first === undefined) seen.set(id.toLowerCase(), i);
    });
  }
  return { ok: false, details };
}

const UNIT_NAMES: ReadonlySet<unknown> = new Set(Object.keys(UNITS));
const TYPE_NAMES: ReadonlySet<unknown> = new Set(EVENT_TYPES);
const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

/**
 * dispatchRequest's answer for a request that passes every one of its rules, checked by
 * hand: the same data, in the same key order (zod's interpreted parse was most of /dr's
 * validation cost under the unit's --jitless). Null for anything else, even a request zod
 * would take: the caller then asks zod, which gives the answer and every problem's path.
 * It never takes what zod refuses (test/unit/dispatch-validate-fast.test.ts).
 */
export function plainValid(body: unknown): DispatchRequest | null {
  if (!isObject(body) || Object.keys(body).length !== 2) return null;
  const { mode, event_slots: slots } = body;
  if ((mode !== "live" && mode !== "test") || !Array.isArray(slots)) return null;
  if (slots.length < 1 || slots.length > MAX_EVENTS_PER_REQUEST) return null;
  const out: DispatchEventInput[] = [];
  const ids = new Set<string>();
  for (const e of slots as unknown[]) {
    const ev = isObject(e) ? plainEvent(e) : null;
    if (!ev) return null;
    const id = ev.event_id.toLowerCase();
    if (ids.has(id)) return null;
    ids.add(id);
    out.push(ev);
  }
  return { mode, event_slots: out };
}

/** One event that passes dispatchEvent and the request's rules on it (end after start, a zero only for a restore), or null. */
function plainEvent(e: Record<string, unknown>): DispatchEventInput | null {
  const { event_id, start_time, end_time, event_type, event_quantity, event_unit, priority, mandatory, cancelled } = e;
  if (typeof event_id !== "string" || !GUID.test(event_id)) return null;
  const startMs = utcMs(start_time);
  const endMs = utcMs(end_time);
  if (startMs === null || endMs === null || endMs <= startMs || !TYPE_NAMES.has(event_type) || !UNIT_NAMES.has(event_unit)) return null;
  if (typeof event_quantity !== "number" || !Number.isFinite(event_quantity) || !(event_quantity >= 0) || event_quantity > 1e9) return null;
  if (zeroQuantity(e) || typeof priority !== "number" || !Number.isInteger(priority) || priority < 1 || priority > 99) return null;
  if (typeof mandatory !== "boolean" || typeof cancelled !== "boolean") return null;
  return {
    event_id,
    start_time: start_time as string, // utcMs took it: a string
    end_time: end_time as string,
    event_type: event_type as DispatchEventInput["event_type"],
    event_quantity,
    event_unit: event_unit as EventUnit,
    priority,
    mandatory,
    cancelled,
  };
}

/** Paths of event fields the spec does not name (dropped from the parsed request). */
function ignoredFields(slots: unknown): string[] {
  const out: string[] = [];
  if (!Array.isArray(slots)) return out;
  slots.forEach((e, i) => {
    if (typeof e !== "object" || e === null) return;
    for (const k of Object.keys(e)) if (!EVENT_FIELDS.has(k)) out.push(`event_slots[${i}].${k}`);
  });
  return out;
}
export type DispatchEventInput = z.infer<typeof dispatchEvent>;

export const receiptSchema = z.array(z.object({ event_id: z.string(), status: z.enum(["accepted", "cancelled"]) }));

/** An event as the scheduler sees it. */
export interface EventSpec {
  event_id: string;
  /** "partner", or "local:<schedule name>" for config schedules. */
  source: string;
  mode: "test" | "live";
  event_type: EventType;
  quantity: number;
  unit: EventUnit;
  quantity_w: number;
  start_ms: number;
  end_ms: number;
  priority: number;
  mandatory: boolean;
  cancelled: boolean;
  /** pv_limit: the cap on every PV inverter, percent of its rating. */
  limit_pct?: number;
}

export function toSpec(e: DispatchEventInput, mode: "test" | "live", source = "partner"): EventSpec {
  return {
    event_id: e.event_id,
    source,
    mode,
    event_type: e.event_type,
    quantity: e.event_quantity,
    unit: e.event_unit,
    quantity_w: e.event_quantity * UNITS[e.event_unit],
    start_ms: Date.parse(e.start_time),
    end_ms: Date.parse(e.end_time),
    priority: e.priority,
    mandatory: e.mandatory,
    cancelled: e.cancelled,
  };
}

/**
 * What makes two submissions "the same command": everything but the spelling of the
 * times and the case of the id. A change of `cancelled` alone is a cancellation.
 */
export function contentHash(s: EventSpec): string {
  const { event_id, source, mode, event_type, quantity, unit, start_ms, end_ms, priority, mandatory, cancelled, limit_pct } = s;
  const fields: unknown[] = [
    event_id.toLowerCase(),
    source,
    mode,
    event_type,
    quantity,
    unit,
    start_ms,
    end_ms,
    priority,
    mandatory,
    cancelled,
  ];
  if (limit_pct !== undefined) fields.push(limit_pct);
  return hash("sha256", JSON.stringify(fields), "hex").slice(0, 32); // one-shot: no Hash object per event
}

/**
 * The bound on how far ahead an event may start, as the 400 that refuses the request
 * (event_slots[i] is the event), or null within it. Checked at receipt, with the receipt time.
 */
export function startTooFar(spec: EventSpec, now: number, i: number): SitegateError | null {
  if (spec.start_ms - now <= MAX_START_AHEAD_MS) return null;
  const latest = new Date(now + MAX_START_AHEAD_MS).toISOString();
  return new SitegateError(
    "INVALID_REQUEST",
    `start_time is over the limit of ${MAX_START_AHEAD_DAYS} days after receipt; nothing was stored`,
    {
      details: [
        { path: `event_slots[${i}].start_time`, message: `must be at most ${MAX_START_AHEAD_DAYS} days after receipt (${latest})` },
      ],
    },
  );
}

/** The bound on an event's length, as the 400 that refuses the request (event_slots[i] is the event), or null within it. */
export function tooLong(spec: EventSpec, i: number): SitegateError | null {
  if (spec.end_ms - spec.start_ms <= MAX_EVENT_MS) return null;
  return new SitegateError("INVALID_REQUEST", `end_time is over the limit of ${MAX_EVENT_HOURS} h after start_time; nothing was stored`, {
    details: [{ path: `event_slots[${i}].end_time`, message: `must be at most ${MAX_EVENT_HOURS} h after start_time` }],
  });
}

/** The bound on events not yet ended, as the 400 that refuses a request that would make `open` of them, or null. */
export function tooManyOpen(open: number): SitegateError | null {
  if (open <= MAX_OPEN_EVENTS) return null;
  return new SitegateError(
    "INVALID_REQUEST",
    `the request would make ${open} events not yet ended, over the limit of ${MAX_OPEN_EVENTS} per site; nothing was stored`,
    {
      details: [
        { path: "event_slots", message: `at most ${MAX_OPEN_EVENTS} events not yet ended per site; cancel some or wait until they end` },
      ],
    },
  );
}

/** Watts back into the event's unit, rounded to what a partner reads (1 mW). */
export function fromWatts(w: number, unit: EventUnit): number {
  return Math.round((w / UNITS[unit]) * 1e6) / 1e6;
}
