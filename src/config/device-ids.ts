// One device_id names one device, whatever its family (DESIGN B5), wherever a device
// enters: the config file (each family's block, schema.ts), the configure endpoint and the fleet's
// configure command. The one check above the families: each caller lists the devices it
// already has (family and where they come from) and those that enter, and gets back every
// clash, naming both devices, and every new id outside the charset.
import type { ErrorDetail } from "../errors.js";
import { CONFIG_BLOCK_IDS, type Config } from "./schema.js";

/** What a new device_id must match: no NUL, newline, `/`, `+` or `#`, which would reach topics and metric labels. */
export const DEVICE_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** A device as the id check sees it: its id, its family and where it comes from (a config path, "the registry"). */
export interface DeclaredDevice {
  device_id: string;
  family: string;
  where: string;
}

/** Why `id` may not name a new device (undefined: it may). */
export function deviceIdProblem(id: string): string | undefined {
  return DEVICE_ID_PATTERN.test(id) ? undefined : "must be 1 to 64 characters of A-Z a-z 0-9 . _ - (no space, NUL, newline, / + #)";
}

/** A device_id for messages: JSON-quoted, so a control character shows as an escape. */
function shown(id: string): string {
  return JSON.stringify(id.length > 80 ? `${id.slice(0, 80)}...` : id);
}

/**
 * The clashes of `entering` with `held` and among themselves: an id held by a device of
 * another family, or twice among those entering. A device entering under the id of a
 * held device of its own family is that device again (a new configuration), not a clash.
 */
export function deviceIdClashes(held: readonly DeclaredDevice[], entering: readonly DeclaredDevice[]): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  const owners = new Map<string, DeclaredDevice>();
  for (const d of held) if (!owners.has(d.device_id)) owners.set(d.device_id, d);
  const seen = new Map<string, DeclaredDevice>();
  for (const d of entering) {
    const twin = seen.get(d.device_id);
    const owner = owners.get(d.device_id);
    const other = twin ?? (owner && owner.family !== d.family ? owner : undefined);
    if (other)
      out.push({
        path: `${d.where}.device_id`,
        message: `duplicate device_id ${shown(d.device_id)}: ${d.where} (${d.family}) and ${other.where} (${other.family}) both name it; one device_id names one device`,
      });
    else seen.set(d.device_id, d);
  }
  return out;
}

/** The new ids of `entering` outside the charset; ids in `kept` (devices the site already has) are left to a warning. */
export function newDeviceIdProblems(entering: readonly DeclaredDevice[], kept: ReadonlySet<string> = new Set()): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const d of entering) {
    const problem = kept.has(d.device_id) ? undefined : deviceIdProblem(d.device_id);
    if (problem) out.push({ path: `${d.where}.device_id`, message: `device_id ${shown(d.device_id)} ${problem}` });
  }
  return out;
}

/** Warnings for ids a site already has that a new device could not take: kept, so that no update stops a working site. */
export function keptDeviceIdWarnings(devices: readonly DeclaredDevice[]): string[] {
  return devices
    .filter((d) => deviceIdProblem(d.device_id) !== undefined)
    .map((d) => `${d.where}: device_id ${shown(d.device_id)} is kept, but a new device could not take it: ${deviceIdProblem(d.device_id)}`);
}

/** The config file's devices, every family's block (each says which ids it declares), by their config path. */
export function configDeclaredDevices(cfg: Config): DeclaredDevice[] {
  return CONFIG_BLOCK_IDS.flatMap((ids) => ids(cfg));
}
