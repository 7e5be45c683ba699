// The device profile schema: device knowledge as data. A profile says how to pair a
// device (identity registers, or SunSpec discovery), which registers hold which canonical
// metric and how to decode them, what device sync publishes (device_type, max power,
// capabilities), its role and op-mode map, and how the device executes charge / discharge / shed / restore /
// curtail (register writes). Adding a device model is adding a file.
import { z } from "zod";
import { OP_MODE_NAMES } from "../model/roles.js";
import { ACTION_NAMES, type ActionName } from "../model/vocabulary.js";
import { checkNames, checkRelocate } from "./cross-refs.js";

import {
  valueType,
  table,
  metricName,
  role,
  capability,
  pointClass,
  register,
  unitId,
  wordOrder,
  enumRef,
  sentinels,
  notAvailable,
} from "./schema-parts.js";

const actionName = z.enum(ACTION_NAMES);
export type { ActionName };

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
    /**
     * Fixed profiles: the step is for the devices whose identity register `identity` read one
     * of `values` at pairing; on the others it is skipped (SMA: the Tripower Smart Energy,
     * device class 8001, is controlled otherwise than the Sunny Boy Storage, 8007).
     */
    when: z
      .strictObject({
        identity: z.string().regex(/^[a-z][a-z0-9_]*$/),
        values: z.array(z.number().int()).min(1),
      })
      .optional(),
    offset: z.number().int().min(0).optional(),
    type: valueType.default("u16"),
    /** Word order of a 32- or 64-bit value on the wire (little: low word first). */
    word_order: wordOrder,
    unit: unitId.optional(),
    /** A number, a parameter of the action, or a named constant of the profile's enums (ems_mode.forced). */
    value: z.union([z.number(), z.enum(["$pct", "$watts", "$on", "$off"]), enumRef]),
    /**
     * Multiplier of the engineering value before it is written, after the range check:
     * -1 for a device that takes a charge as a negative setpoint, 0.1 for a register in
     * units of 10 W. The raw value is rounded for integer types.
     */
    scale: z
      .number()
      .refine((x) => x !== 0, "must not be 0")
      .default(1),
    /**
     * A register the device will not let be read (write-only): the value that puts it back
     * at the end of an event, recorded instead of a read pre-event state.
     */
    restore: z.union([z.number(), z.literal("$max_power_w"), enumRef]).optional(),
    /** SunSpec: offset of the scale-factor point in the step's model (e.g. InOutWRte_SF). */
    sf_offset: z.number().int().min(2).optional(),
    /** Fixed profiles: absolute holding register of the scale factor. */
    sf_address: register.optional(),
    /** [min, max] of the engineering value (after `per`), inclusive. */
    range: z.tuple([rangeBound, rangeBound]).optional(),
    /** The same value to this many consecutive registers (every program of a time-of-use table). */
    count: z.number().int().min(1).max(16).default(1),
    /**
     * A setting the device keeps in flash: a register is written only when the device holds
     * another value, at the action and at the write-back of the pre-event state alike.
     */
    flash: z.boolean().default(false),
    /**
     * The engineering value divided by a live reading of this register before it is
     * written (watts / the battery's volts = amperes). Read at every action, never kept.
     */
    per: z
      .strictObject({
        table: z.enum(["holding", "input"]).default("holding"),
        address: register,
        type: z.enum(["u16", "s16"]).default("u16"),
        /** Multiplier of the raw reading (0.01 for a voltage in 0.01 V). */
        scale: z.number().positive().default(1),
      })
      .optional(),
  })
  .superRefine((s, ctx) => {
    if (s.sf_offset !== undefined && s.model === undefined)
      ctx.addIssue({ code: "custom", path: ["sf_offset"], message: "needs model (SunSpec steps); use sf_address for a fixed address" });
    if (s.sf_offset !== undefined && s.sf_address !== undefined)
      ctx.addIssue({ code: "custom", path: ["sf_address"], message: "give sf_offset or sf_address, not both" });
    if (
      (s.sf_offset !== undefined || s.sf_address !== undefined || s.range || s.scale !== 1 || s.restore !== undefined) &&
      s.table === "coil"
    ) {
      ctx.addIssue({ code: "custom", path: ["table"], message: "coils take no scale factor or range" });
    }
    if ((s.count !== 1 || s.flash || s.per) && s.table === "coil")
      ctx.addIssue({ code: "custom", path: ["table"], message: "count, flash and per are for holding registers" });
    if (s.per && s.value !== "$watts" && s.value !== "$pct")
      ctx.addIssue({ code: "custom", path: ["per"], message: "divides a power or a percent ($watts, $pct)" });
    if (s.restore !== undefined && s.flash)
      ctx.addIssue({ code: "custom", path: ["flash"], message: "a write-only register cannot be compared before it is written" });
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

export { enumValue } from "./cross-refs.js";

const fixedPoint = z.strictObject({
  metric: metricName,
  table: table.default("holding"),
  address: register,
  type: valueType.default("u16"),
  length: z.number().int().min(1).max(64).optional(),
  word_order: wordOrder,
  unit: unitId.optional(),
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
  na: sentinels,
  /**
   * A magnitude whose sign is in another register: the value is negated while that
   * register (or its `bit`) reads one of `negative`. A device with the opposite sign
   * convention from the canonical one takes `scale: -1` instead.
   */
  direction: z
    .strictObject({
      table: table.default("holding"),
      address: register,
      unit: unitId.optional(),
      type: z.enum(["u16", "s16", "u32", "bitfield16", "bitfield32"]).default("u16"),
      word_order: wordOrder,
      /** Only this bit of the register (0 = least significant) is the direction: it reads 0 or 1. */
      bit: z.number().int().min(0).max(31).optional(),
      negative: z.array(z.number().int()).min(1),
    })
    .optional(),
  /**
   * A second magnitude subtracted from this one (same type, word order and scale): a signed
   * power from a device that reports charge and discharge, or import and export, apart.
   */
  minus: z
    .strictObject({
      table: table.default("holding"),
      address: register,
      na: sentinels,
    })
    .optional(),
  /** Names of the values, from the profile's `enums` (a state shown by name on the status page). */
  enum: z
    .string()
    .regex(/^[a-z][a-z0-9_]*$/)
    .optional(),
  class: pointClass,
  /**
   * Coils (or discrete inputs): `length` of them starting at address as one number, a bit
   * mask: the one at address is bit 0 (1), the next bit 1 (2) ...; a set bit is a closed coil.
   */
  bitmask: z.boolean().default(false),
  /**
   * The role cannot do without this point: pairing is refused by name when it does not
   * answer. Any other point that answers exception 2 or stays silent is unavailable for
   * that device (left out, probed again hourly). A role's minimum (battery power_w and
   * soc_pct, PV power_w, meter power_w) is required whether marked or not.
   */
  required: z.boolean().default(false),
});

/**
 * What an identity register must read for the device to be this profile's (`scan
 * --identify`): one of these values, a string that starts with one of these prefixes, or a
 * number within one of these ranges. A register without `expect` is read and shown, and
 * identifies nothing: a device that merely answers matches no profile.
 */
const identityExpect = z
  .strictObject({
    values: z.array(z.number().int()).min(1).optional(),
    prefix: z.array(z.string().min(1)).min(1).optional(),
    ranges: z
      .array(z.tuple([z.number().int(), z.number().int()]))
      .min(1)
      .optional(),
  })
  .refine((e) => [e.values, e.prefix, e.ranges].filter((x) => x !== undefined).length === 1, "give exactly one of values, prefix, ranges");

const identityRegister = z
  .strictObject({
    name: z.string().regex(/^[a-z][a-z0-9_]*$/),
    table: table.default("holding"),
    address: register,
    unit: unitId.optional(),
    type: valueType.default("u16"),
    length: z.number().int().min(1).max(64).optional(),
    word_order: wordOrder,
    expect: identityExpect.optional(),
  })
  .superRefine((r, ctx) => {
    if (r.expect?.prefix && r.type !== "string") ctx.addIssue({ code: "custom", path: ["expect"], message: "prefix needs type string" });
    if ((r.expect?.values || r.expect?.ranges) && r.type === "string")
      ctx.addIssue({ code: "custom", path: ["expect"], message: "a string register takes prefix" });
  });

/** A register read back after an action: the action failed unless it holds `expect` (a mode that took effect). */
const readBack = z.strictObject({
  table: z.enum(["holding", "input"]).default("holding"),
  address: register,
  unit: unitId.optional(),
  type: z.enum(["u16", "s16", "u32", "s32", "bitfield16", "bitfield32"]).default("u16"),
  word_order: wordOrder,
  expect: z.union([z.number().int(), enumRef]),
});

/** The device's rated power read from a register at pairing (W after scale). */
const ratedPower = z.strictObject({
  table: z.enum(["holding", "input"]).default("holding"),
  address: register,
  unit: unitId.optional(),
  type: z.enum(["u16", "s16", "u32", "s32", "f32"]).default("u16"),
  word_order: wordOrder,
  scale: z.number().positive().default(1),
  na: sentinels,
});

const common = {
  name: z.string().regex(/^[A-Za-z0-9._-]+$/),
  /**
   * Unit ids of the device's own sub-devices (a GX gateway's VE.Bus system at 100) that a
   * write step may name; a write goes to the device's unit or one of these, never unit 0.
   */
  sub_units: z.array(z.number().int().min(1).max(255)).max(16).default([]),
  description: z.string().default(""),
  capabilities: z.array(capability).default(["telemetry"]),
  /** Registers per read this device accepts (some meters refuse more than 50-80). */
  max_read_regs: z.number().int().min(1).max(125).default(125),
  /** Minimum milliseconds between two requests to this device. */
  delay_ms: z.number().int().min(0).max(1000).default(0),
  timeout_ms: z.number().int().min(50).max(10000).default(1000),
  /** Milliseconds of quiet after a connect before this device's first request (slow dongles). */
  connect_delay_ms: z.number().int().min(0).max(10_000).default(0),
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
   * Seconds after which the device reverts a forced mode on its own when nothing rewrites
   * it (a watchdog): refresh_s must be set and shorter, so an event holds the mode.
   */
  revert_s: z.number().int().min(1).max(86_400).optional(),
  /** Named constants: `enums.ems_mode.forced: 2` is written `value: ems_mode.forced` and shown as a point's state name. */
  enums: z.record(z.string().regex(/^[a-z][a-z0-9_]*$/), z.record(z.string().regex(/^[a-z0-9_]+$/), z.number().int())).default({}),
  /**
   * Where an action's registers are write-only (its steps name a `restore`) and it has no
   * read-back: how long (ms) the device's power may take to move as asked before the write
   * counts as not followed (B4 closed loop).
   */
  confirm_window_ms: z.number().int().min(0).max(60_000).default(5000),
  /** Per action, registers read after its writes that must hold the given value, or the action fails. */
  readback: z.partialRecord(actionName, z.array(readBack).min(1)).default({}),
  /**
   * Which polled metric shows a forced charge or discharge, and its values for each: a
   * reading outside them shows the device back on its own control (its revert timer ran out,
   * a fault), and dispatch credits an event nothing for that time (B4 closed loop).
   */
  forced_mode: z
    .strictObject({ metric: metricName, charge: z.array(z.number().int()).min(1), discharge: z.array(z.number().int()).min(1) })
    .optional(),
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

export const fixedProfileSchema = z
  .strictObject({
    ...common,
    kind: z.literal("fixed"),
    role,
    max_power_w: z.number().positive().optional(),
    /** Rated power from the device; max_power_w is the fallback when it gives no value. */
    max_power: ratedPower.optional(),
    identity: z.array(identityRegister).default([]),
    not_available: notAvailable,
    points: z.array(fixedPoint).min(1),
    unreadable: z.array(z.strictObject({ table, address: register, count: z.number().int().min(1) })).default([]),
    /**
     * Points whose block a device may hold elsewhere, or not at all (a SolarEdge meter at
     * its default base or shifted by +50/+70): at pairing, the first shift at which the
     * marker register reads one of `values` moves the points by that many registers; none:
     * the points are unavailable for that device.
     */
    relocate: z
      .array(
        z.strictObject({
          points: z.array(metricName).min(1),
          marker: z.strictObject({ table: table.default("holding"), address: register, values: z.array(z.number().int()).min(1) }),
          shifts: z.array(z.number().int().min(0).max(1000)).min(1),
        }),
      )
      .default([]),
  })
  .superRefine(checkNames)
  .superRefine(checkRelocate);

const sunspecPoint = z.strictObject({
  metric: metricName,
  offset: z.number().int().min(2),
  type: valueType,
  length: z.number().int().min(1).max(64).optional(),
  sf_offset: z.number().int().min(2).optional(),
  scale: z.number().default(1),
  /** Names of the values, from the profile's `enums` (an operating state read in words). */
  enum: z
    .string()
    .regex(/^[a-z][a-z0-9_]*$/)
    .optional(),
  class: pointClass,
  /** As a register profile's: the role cannot do without it (checked at pairing). */
  required: z.boolean().default(false),
});

export const sunspecProfileSchema = z
  .strictObject({
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
  })
  .superRefine(checkNames);

export const profileSchema = z.discriminatedUnion("kind", [fixedProfileSchema, sunspecProfileSchema]);
export type IdentityRegister = z.infer<typeof identityRegister>;
export type ReadBack = z.infer<typeof readBack>;
export type Profile = z.infer<typeof profileSchema>;
export type FixedProfile = z.infer<typeof fixedProfileSchema>;
export type SunSpecProfile = z.infer<typeof sunspecProfileSchema>;
/** A write step; word order, scale, count and flash may be left out (big, 1, 1, false) where a step is built in code. */
export type WriteStep = Omit<z.infer<typeof writeStep>, "word_order" | "scale" | "count" | "flash"> &
  Partial<Pick<z.infer<typeof writeStep>, "word_order" | "scale" | "count" | "flash">>;
