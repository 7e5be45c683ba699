// The parts of a config file that parse, when the whole does not: the rules beyond the
// schema (a known profile, one device_id per device, readable files) still run on them, so
// that one run of check-config lists every problem, not those of the schema first.
import type { z } from "zod";
import type { ErrorDetail } from "../errors.js";
import { validateDevices, type DeviceRules } from "../modbus/config-rules.js";
import { deviceConfigSchema, type DeviceConfig } from "../modbus/config-schema.js";
import { configSchema, type Config } from "./schema.js";

type Block = keyof Config;

export interface ParsedParts {
  /** The blocks that parsed; only a rule whose blocks all did reads the others. */
  cfg: Config;
  ok: Set<Block>;
  /** When only some devices parsed: the rules' `devices[j]` paths back to the file's index. */
  devicePaths?: (d: ErrorDetail) => ErrorDetail;
}

/** Each top-level block of `raw` parsed on its own; of a `devices` list that fails, the entries that parse. */
export function parsedBlocks(raw: unknown): ParsedParts {
  const cfg: Record<string, unknown> = {};
  const ok = new Set<Block>();
  const input = raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  for (const [key, schema] of Object.entries(configSchema.shape)) {
    const r = (schema as z.ZodType).safeParse(input[key]);
    if (!r.success) continue;
    cfg[key] = r.data;
    ok.add(key as Block);
  }
  if (ok.has("devices") || !Array.isArray(input.devices)) return { cfg: cfg as Config, ok };
  const index: number[] = [];
  const devices: DeviceConfig[] = [];
  input.devices.forEach((d, i) => {
    const r = deviceConfigSchema.safeParse(d);
    if (!r.success) return;
    index.push(i);
    devices.push(r.data);
  });
  cfg.devices = devices;
  ok.add("devices");
  const devicePaths = (d: ErrorDetail) => ({
    ...d,
    path: d.path.replace(/^devices\[(\d+)\]/, (_, j: string) => `devices[${index[Number(j)] ?? j}]`),
  });
  return { cfg: cfg as Config, ok, devicePaths };
}

/**
 * The device entries that did not parse still name their profile: an unknown one (or
 * another organization) is listed with their schema problems, not after they are fixed.
 */
export function unparsedDeviceIssues(raw: unknown, organizationId: string, profiles: DeviceRules["profiles"]): ErrorDetail[] {
  const list = (raw as { devices?: unknown }).devices;
  if (!Array.isArray(list)) return [];
  const out: ErrorDetail[] = [];
  list.forEach((d, i) => {
    const named = deviceConfigSchema.options[0].shape.device_integration.safeParse(
      (d as Record<string, unknown> | null)?.device_integration,
    );
    if (!named.success || deviceConfigSchema.safeParse(d).success) return;
    // only the integration's rules: the entry's other fields are the schema's problems
    const only = { device_integration: named.data } as DeviceConfig;
    for (const p of validateDevices([only], { organizationId, rtuPorts: {}, profiles }))
      out.push({ ...p, path: p.path.replace(/^devices\[0\]/, `devices[${i}]`) });
  });
  return out;
}
