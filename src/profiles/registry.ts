// Loads and validates the device profiles: the built-in ones shipped in builtin/, plus
// any in an extra folder. A profile that fails validation is an error with its path.
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { SitegateError } from "../errors.js";
import { issuesToDetails } from "../config/issues.js";
import { profileSchema, type Profile } from "./schema.js";

/** The profile files ship in the source tree; compiled code finds them from dist/src/profiles. */
export const BUILTIN_DIR = (() => {
  const here = fileURLToPath(new URL(".", import.meta.url));
  return here.includes(`${"/dist/"}`) ? resolve(here, "../../../src/profiles/builtin") : resolve(here, "builtin");
})();

export function loadProfileFile(file: string): Profile {
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, "utf8"), { merge: true });
  } catch (e) {
    throw new SitegateError("PROFILE_INVALID", `profile ${file}: ${(e as Error).message}`);
  }
  const r = profileSchema.safeParse(raw);
  if (!r.success) throw new SitegateError("PROFILE_INVALID", `profile ${file} is invalid`, { details: issuesToDetails(r.error.issues) });
  return r.data;
}

export class ProfileRegistry {
  private readonly profiles = new Map<string, Profile>();

  constructor(dirs: string[] = [BUILTIN_DIR]) {
    for (const dir of dirs) {
      for (const f of readdirSync(dir)
        .filter((f) => /\.(ya?ml|json)$/.test(f))
        .sort()) {
        const p = loadProfileFile(join(dir, f));
        this.profiles.set(p.name, p);
      }
    }
  }

  names(): string[] {
    return [...this.profiles.keys()].sort();
  }

  has(name: string): boolean {
    return this.profiles.has(name);
  }

  get(name: string): Profile {
    const p = this.profiles.get(name);
    if (!p) throw new SitegateError("PROFILE_NOT_FOUND", `no device profile "${name}" (known: ${this.names().join(", ")})`);
    return p;
  }
}

let builtin: ProfileRegistry | null = null;
/** The built-in profiles, loaded once. */
export function builtinProfiles(): ProfileRegistry {
  builtin ??= new ProfileRegistry();
  return builtin;
}
