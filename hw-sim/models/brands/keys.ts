// The scenario keys a device takes, shared by the scenario file (hw-sim/scenario.ts) and
// the brand table (./index.ts), which builds each brand's own schema from them.
import { z } from "zod";

export const unit = z.number().int().min(1).max(247);
export const common = { unit, name: z.string().regex(/^[A-Za-z0-9_-]+$/), max_read_regs: z.number().int().min(1).max(125).optional() };

/**
 * The device's wait after a client connects (ms): requests within it go unanswered. Each
 * brand's default is its sources' (0 where none asks for a wait).
 */
export const connectDelay = (ms: number) => z.number().int().min(0).max(60_000).default(ms);

/** The keys every brand hybrid inverter with a battery takes (hw-sim/models/brands). */
export const hybrid = {
  ...common,
  max_power_w: z.number().positive().default(5000),
  capacity_wh: z.number().positive().default(10000),
  soc_pct: z.number().min(0).max(100).default(50),
  /** The PV array on the inverter's own inputs, W at full sun. */
  pv_max_w: z.number().min(0).default(5000),
  /** The share of the site's base load the inverter's own self-consumption covers. */
  self_use_load_pct: z.number().min(0).max(100).default(100),
  serial: z
    .string()
    .regex(/^[A-Za-z0-9-]{1,20}$/)
    .optional(),
  connect_delay_ms: connectDelay(0),
};
export const ratedPower = (w: number) => z.number().positive().max(30000).default(w);
export const reads = z.enum(["grid", "load"], { error: 'must be "grid" or "load"' }).default("grid");
