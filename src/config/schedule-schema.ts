// The config's local dispatch schedules (DESIGN B4): node-cron syntax in an IANA time zone.
// The dispatch vocabulary (event types, units) lives here, below both config and dispatch.
import { z } from "zod";
import { nodeCron } from "../util/node-cron.js";

export const EVENT_TYPES = ["charge", "discharge", "shed", "restore"] as const;
/** The partner's event types, and the local-only `pv_limit` (a GPIO input's `on_active`). */
export type EventType = (typeof EVENT_TYPES)[number] | "pv_limit";
export const UNITS = { w: 1, kW: 1000, MW: 1_000_000 } as const;
export type EventUnit = keyof typeof UNITS;

function validZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const scheduleSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, "letters, digits, dot, dash and underscore only")
    .describe("The schedule's name, unique"),
  cron: z
    .string()
    .refine((c) => nodeCron().validate(c), { error: 'is not a valid cron expression (node-cron syntax, e.g. "0 1 * * *")' })
    .describe('When each event starts, in node-cron syntax (e.g. "0 1 * * *")'),
  timezone: z
    .string()
    .default("UTC")
    .refine(validZone, { error: "is not an IANA time zone (e.g. Europe/Berlin)" })
    .describe("The IANA time zone of cron"),
  duration_s: z
    .number()
    .int()
    .min(1)
    .max(7 * 86400)
    .describe("How long each event runs (s)"),
  event_type: z.enum(EVENT_TYPES).describe("The dispatch event's kind"),
  event_quantity: z.number().nonnegative().describe("Power the event asks for, in event_unit"),
  event_unit: z.enum(Object.keys(UNITS) as [EventUnit, ...EventUnit[]]).describe("Unit of event_quantity"),
});

export type Schedule = z.infer<typeof scheduleSchema>;
