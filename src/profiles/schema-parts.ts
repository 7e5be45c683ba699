// The building blocks of the device profile schema (schema.ts): value types, tables,
// register numbers, word order, enum references and the "not available" values.
import { z } from "zod";
import { ROLES } from "../model/roles.js";
import { CAPABILITIES } from "../model/vocabulary.js";

export const valueType = z.enum([
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
export const table = z.enum(["holding", "input", "coil", "discrete"]);
export const metricName = z.string().regex(/^[a-z][a-z0-9_]*$/, "metric names are snake_case with a unit suffix (power_w)");
export const role = z.enum(ROLES);
export const capability = z.enum(CAPABILITIES);
export const pointClass = z.enum(["fast", "slow"]).default("fast");
export const register = z.number().int().min(0).max(65535);
/** A sub-device's own unit id (a gateway that answers for several devices); absent: the device's configured unit. */
export const unitId = z.number().int().min(0).max(255);
export const wordOrder = z.enum(["big", "little"]).default("big");
/** A constant of one of the profile's `enums`, written `enum.label` (ems_mode.forced). */
export const enumRef = z.string().regex(/^[a-z][a-z0-9_]*\.[a-z0-9_]+$/, "a named value is written enum.label (ems_mode.forced)");
/**
 * Raw register values that mean "not available" for this point (0x7FFF, 0xFFFF, 0x8000,
 * 0xFFFFFFFF ...): the whole register width as one unsigned number, high word first after
 * word_order. Such a reading gives no value, never a number.
 */
export const sentinels = z.array(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)).default([]);
/**
 * A brand's "not available" values per data type, for every point of that type (SMA: s32
 * 0x80000000, u32 0xFFFFFFFF, u64 all ones); `enum`: for the points that name an enum (SMA's
 * status values 0xFFFFFD). Added to a point's own `na`. `all_ones`: every bit of the value
 * set (a 64-bit value is beyond a safe integer).
 */
export const notAvailable = z
  .partialRecord(
    z.enum([...valueType.options, "enum"]),
    z.array(z.union([z.number().int().min(0).max(Number.MAX_SAFE_INTEGER), z.literal("all_ones")])).min(1),
  )
  .default({});
