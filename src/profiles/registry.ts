// Loads and validates the device profiles: the built-in ones shipped in builtin/, plus
// the site's own in profiles_dir. A built-in that fails validation is an error with its
// path; a site profile that fails is reported by its path and left out, so one broken
// file never stops the gateway. Every file is read safely (read-safely.ts): a regular
// file of at most 256 KiB, parsed with depth and alias limits, no content in errors.
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SitegateError, errorMessage, type ErrorDetail } from "../errors.js";
import { issuesToDetails } from "../util/zod-issues.js";
import { profileSchema, type Profile } from "./schema.js";
import { parseProfileYaml, profilesDirProblem, readProfileText } from "./read-safely.js";

/** The profile files ship in the source tree; compiled code finds them from dist/src/profiles. */
export const BUILTIN_DIR = (() => {
  const here = fileURLToPath(new URL(".", import.meta.url));
  return here.includes(`${"/dist/"}`) ? resolve(here, "../../../src/profiles/builtin") : resolve(here, "builtin");
})();

export function loadProfileFile(file: string): Profile {
  let raw: unknown;
  try {
    raw = parseProfileYaml(readProfileText(file));
  } catch (e) {
    // A SitegateError of read-safely names a place, never the text; a system error its code only.
    const why = e instanceof SitegateError ? e.message : `cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`;
    throw new SitegateError("PROFILE_INVALID", `profile ${file} ${why}`);
  }
  const r = profileSchema.safeParse(raw);
  if (!r.success) throw new SitegateError("PROFILE_INVALID", `profile ${file} is invalid`, { details: issuesToDetails(r.error.issues) });
  return r.data;
}

function profileFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /\.(ya?ml|json)$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

export class ProfileRegistry {
  private readonly profiles = new Map<string, Profile>();
  /** Site profile files that did not load, by path (each one left out). */
  readonly errors: ErrorDetail[] = [];

  constructor(dirs: string[] = [BUILTIN_DIR]) {
    for (const dir of dirs) {
      for (const file of profileFiles(dir)) {
        const p = loadProfileFile(file);
        this.profiles.set(p.name, p);
      }
    }
  }

  /**
   * Adds the site's profiles from `dir` (absent or empty: none). A file that does not
   * parse, fails validation, or reuses a name already loaded is recorded in `errors` by
   * its path and left out; the others load.
   */
  addSiteDir(dir: string): this {
    if (!existsSync(dir)) return this;
    let files: string[];
    try {
      const problem = profilesDirProblem(dir);
      if (problem) throw new SitegateError("PROFILE_INVALID", `${problem}: none of its profiles is loaded`);
      files = profileFiles(dir);
    } catch (e) {
      this.errors.push({ path: dir, message: errorMessage(e) });
      return this;
    }
    for (const file of files) {
      try {
        const p = loadProfileFile(file);
        if (this.profiles.has(p.name))
          throw new SitegateError(
            "PROFILE_INVALID",
            `profile name "${p.name}" is already taken (a built-in or an earlier file); give it another name`,
          );
        this.profiles.set(p.name, p);
      } catch (e) {
        const details = e instanceof SitegateError ? e.details.map((d) => `${d.path || "(file)"}: ${d.message}`).join("; ") : "";
        this.errors.push({ path: file, message: details ? `invalid profile: ${details}` : errorMessage(e) });
      }
    }
    return this;
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

/** The built-in profiles plus the site's own from profiles_dir (see ProfileRegistry.errors for those left out). */
export function siteProfiles(profilesDir: string | undefined): ProfileRegistry {
  const r = new ProfileRegistry();
  return profilesDir ? r.addSiteDir(profilesDir) : r;
}

let builtin: ProfileRegistry | null = null;
/** The built-in profiles, loaded once. */
export function builtinProfiles(): ProfileRegistry {
  builtin ??= new ProfileRegistry();
  return builtin;
}
