// The device profile schema: device knowledge as data. A profile says how to pair a
// device (identity registers, or SunSpec discovery), which registers hold which canonical
// metric and how to decode them, what device sync publishes (device_type, max power,
// capabilities), its role and op-mode map, and how the device executes charge / discharge / shed / restore /
// curtail (register writes). Adding a device model is adding a file.
import { z } from "zod";
import { OP_MODE_NAMES, ROLES } from "../devices/roles.js";

const valueType = z.enum([
  "u16",
  "s16",
  "u32",
  "s32",
  "u64",
  "s64",
  "f32",
  "f64",
  "string",
  "bitfield16",
  "bitfield32",
  "acc32",
  "acc64",
  "sunssf",
]);
const table = z.enum(["holding", "input", "coil", "discrete"]);
const metricName = z.string().regex(/^[a-z][a-z0-9_]*$/, "metric names are snake_case with a unit suffix (power_w)");
const role = z.enum(ROLES);
const capability = z.enum(["telemetry", "charge", "discharge", "shed", "restore", "curtail"]);
const pointClass = z.enum(["fast", "slow"]).default("fast");
const register = z.number().int().min(0).max(65535);
export const ACTION_NAMES = ["charge", "discharge", "shed", "restore", "curtail", "release"] as const;
const actionName = z.enum(ACTION_NAMES);
export type ActionName = (typeof ACTION_NAMES)[number];

/** A bound of a control value: a number in engineering units, or the device's rated power. */
const rangeBound = z.union([z.number(), z.literal("$max_power_w")]);

/**
 * A register write of a control action. `value` is a number or a parameter of the action,
 * in engineering units (percent, watts). When the device publishes a scale factor for the
 * register (SunSpec `*_SF`), the step names that point (`sf_offset` in the same model, or
 * `sf_address`) and the raw value written is round(value / 10^sf). `range` bounds the
 * engineering value; a value outside it is refused and nothing of the action is written.
 */
const writeStep = z
  .strictObject({
    table: z.enum(["holding", "coil"]).default("holding"),
    address: register.optional(),
    /** SunSpec profiles: the model and offset from the model id register. */
    model: z.number().int().optional(),
    offset: z.number().int().min(0).optional(),
    type: valueType.default("u16"),
    value: z.union([z.number(), z.enum(["$pct", "$watts", "$on", "$off"])]),
    /** SunSpec: offset of the scale-factor point in the step's model (e.g. InOutWRte_SF). */
    sf_offset: z.number().int().min(2).optional(),
    /** Fixed profiles: absolute holding register of the scale factor. */
    sf_address: register.optional(),
    /** [min, max] of the engineering value, inclusive. */
    range: z.tuple([rangeBound, rangeBound]).optional(),
  })
  .superRefine((s, ctx) => {
    if (s.sf_offset !== undefined && s.model === undefined)
      ctx.addIssue({ code: "custom", path: ["sf_offset"], message: "needs model (SunSpec steps); use sf_address for a fixed address" });
    if (s.sf_offset !== undefined && s.sf_address !== undefined)
      ctx.addIssue({ code: "custom", path: ["sf_address"], message: "give sf_offset or sf_address, not both" });
    if ((s.sf_offset !== undefined || s.sf_address !== undefined || s.range) && s.table === "coil") {
      ctx.addIssue({ code: "custom", path: ["table"], message: "coils take no scale factor or range" });
    }
    if (s.range && typeof s.range[0] === "number" && typeof s.range[1] === "number" && s.range[0] > s.range[1]) {
      ctx.addIssue({ code: "custom", path: ["range"], message: "min must not exceed max" });
    }
    if (
      s.range &&
      typeof s.value === "number" &&
      typeof s.range[0] === "number" &&
      typeof s.range[1] === "number" &&
      (s.value < s.range[0] || s.value > s.range[1])
    ) {
      ctx.addIssue({ code: "custom", path: ["value"], message: `is outside its range [${s.range[0]}, ${s.range[1]}]` });
    }
  });

const fixedPoint = z.strictObject({
  metric: metricName,
  table: table.default("holding"),
  address: register,
  type: valueType.default("u16"),
  length: z.number().int().min(1).max(64).optional(),
  word_order: z.enum(["big", "little"]).default("big"),
  /**
   * Multiplier applied after decoding (e.g. 1000 for kWh -> Wh). The reading is then rounded
   * to what the register carries (codec roundReading): float32 7 significant digits, float64
   * 15, integers the decimals of 10^sf x scale.
   */
  scale: z.number().default(1),
  /** Register holding a signed power-of-ten scale factor for this value. */
  sf_address: register.optional(),
  /** The value uses SunSpec "not implemented" sentinels. */
  sunspec_na: z.boolean().default(false),
  class: pointClass,
  /**
   * Coils (or discrete inputs): `length` of them starting at address as one number, a bit
   * mask: the one at address is bit 0 (1), the next bit 1 (2) ...; a set bit is a closed coil.
   */
  bitmask: z.boolean().default(false),
});

const identityRegister = z.strictObject({
  name: z.string().regex(/^[a-z][a-z0-9_]*$/),
  table: table.default("holding"),
  address: register,
  type: valueType.default("u16"),
  length: z.number().int().min(1).max(64).optional(),
  word_order: z.enum(["big", "little"]).default("big"),
});

const common = {
  name: z.string().regex(/^[A-Za-z0-9._-]+$/),
  description: z.string().default(""),
  capabilities: z.array(capability).default(["telemetry"]),
  /** Registers per read this device accepts (some meters refuse more than 50-80). */
  max_read_regs: z.number().int().min(1).max(125).default(125),
  /** Minimum milliseconds between two requests to this device. */
  delay_ms: z.number().int().min(0).max(1000).default(0),
  timeout_ms: z.number().int().min(50).max(10000).default(1000),
  slow_interval_ms: z.number().int().min(1000).default(60_000),
  /**
   * Control actions as register writes. `release` hands the device back to its own
   * automatic mode at the end of an event; a SunSpec step whose model the device lacks
   * is skipped (one profile serves storage and PV inverters).
   */
  actions: z.partialRecord(actionName, z.array(writeStep).min(1)).default({}),
  /**
   * Seconds between rewrites of an active setpoint, below the revert timeout the action
   * writes to the device (SunSpec RvrtTms); 0: the device holds what it was told.
   */
  refresh_s: z.number().int().min(0).max(3600).default(0),
  /**
   * Which metric carries the device's own operating state and what each value means for
   * device sync's device_op_mode (values not listed: unknown). Without it the op mode is unknown.
   */
  op_mode: z
    .strictObject({
      metric: metricName,
      states: z.record(
        z.string().regex(/^\d+$/),
        z.enum(OP_MODE_NAMES.filter((n) => n !== "remote") as ["unknown", "automatic", "standby", "fault"]),
      ),
    })
    .optional(),
};

export const fixedProfileSchema = z.strictObject({
  ...common,
  kind: z.literal("fixed"),
  role,
  max_power_w: z.number().positive().optional(),
  identity: z.array(identityRegister).default([]),
  points: z.array(fixedPoint).min(1),
  unreadable: z.array(z.strictObject({ table, address: register, count: z.number().int().min(1) })).default([]),
});

const sunspecPoint = z.strictObject({
  metric: metricName,
  offset: z.number().int().min(2),
  type: valueType,
  length: z.number().int().min(1).max(64).optional(),
  sf_offset: z.number().int().min(2).optional(),
  scale: z.number().default(1),
  class: pointClass,
});

export const sunspecProfileSchema = z.strictObject({
  ...common,
  kind: z.literal("sunspec"),
  /** Base addresses probed for the "SunS" marker, in order. */
  bases: z.array(register).min(1).default([40000, 0, 50000]),
  /** Identity strings from the common model (offset, length in registers). */
  identity: z.array(z.strictObject({ name: z.string(), offset: z.number().int().min(2), length: z.number().int().min(1) })),
  /** Metric points per model id; a device is polled for the models it has. */
  models: z.record(z.string().regex(/^\d+$/), z.array(sunspecPoint)),
  /** Where the rated power is: the first model present wins. */
  max_power: z
    .array(z.strictObject({ model: z.number().int(), offset: z.number().int(), sf_offset: z.number().int().optional() }))
    .default([]),
  /** Role and capabilities by the models found: the first rule whose models are all present wins. */
  roles: z.array(z.strictObject({ models: z.array(z.number().int()).min(1), role, capabilities: z.array(capability) })).min(1),
});

export const profileSchema = z.discriminatedUnion("kind", [fixedProfileSchema, sunspecProfileSchema]);
export type Profile = z.infer<typeof profileSchema>;
export type FixedProfile = z.infer<typeof fixedProfileSchema>;
export type SunSpecProfile = z.infer<typeof sunspecProfileSchema>;
export type WriteStep = z.infer<typeof writeStep>;
