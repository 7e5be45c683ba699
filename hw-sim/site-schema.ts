// The site block of a scenario: the simulated site's load, sun, clock and grid. Apart from
// scenario.ts so that the site model and the device models read its type without the
// scenario's brand table (which imports the models).
import { z } from "zod";

function validZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export const siteSchema = z
  .strictObject({
    base_load_w: z.number().min(0).default(2000),
    /** Random variation of the load, percent (seeded, a function of the simulated second). */
    load_noise_pct: z.number().min(0).max(50).default(2),
    /** 0..1 pins the PV irradiance; absent = a daylight curve (see longitude_deg). */
    pv_irradiance: z.number().min(0).max(1).optional(),
    /**
     * Where the site stands, degrees east (west negative): the daylight curve runs on the
     * local mean solar time there (UTC + longitude / 15 h), so the sun is highest at 12:00
     * solar time. Absent: the curve runs on UTC + tz_offset_h.
     */
    longitude_deg: z.number().min(-180).max(180).optional(),
    /** Hours added to UTC for the site's local time (and the daylight curve) when no timezone is given. */
    tz_offset_h: z.number().min(-12).max(14).default(0),
    /**
     * The site's IANA zone: the local time of the devices' own clocks (a time-of-use
     * program's start) and, without a longitude, of the daylight curve.
     */
    timezone: z.string().refine(validZone, "must be an IANA time zone (Europe/Berlin)").optional(),
    /** The site clock's instant at the simulator's start (ISO 8601 with Z or an offset); absent: the machine's clock. */
    start_time: z.iso.datetime({ offset: true, error: "must be an ISO 8601 time with Z or an offset" }).optional(),
    voltage_v: z.number().positive().default(230),
    frequency_hz: z.number().positive().default(50),
  })
  .default({ base_load_w: 2000, load_noise_pct: 2, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 });

export type SiteSpec = z.output<typeof siteSchema>;
