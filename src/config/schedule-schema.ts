// The config's local dispatch schedules (DESIGN B4): node-cron syntax in an IANA time zone.
import { z } from "zod";
import { nodeCron } from "../util/node-cron.js";

import { EVENT_TYPES, UNITS, type EventUnit } from "../model/vocabulary.js";

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
