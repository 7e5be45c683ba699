// The running release's version, as package.json gives it.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** The package version, read once from package.json (two levels above dist/src). */
export const VERSION: string = (() => {
  for (const rel of ["../../package.json", "../package.json"]) {
    try {
      return (JSON.parse(readFileSync(new URL(rel, import.meta.url), "utf8")) as { version: string }).version;
    } catch {
      /* try the next */
    }
  }
  return "0.0.0";
})();

/**
 * The first line of a public key that `sitegate update keygen --development` made (and that
 * `make deb DEV_UPDATE_KEY=1` ships): PEM readers skip text before "-----BEGIN", so the key
 * still loads, and `sitegate --version` can say that this box trusts a development key.
 */
export const DEVELOPMENT_KEY_MARK = "# sitegate development update key: trust it on bench boxes only";

/** The trusted update keys (*.pub in `dir`) that are marked as development keys. */
export function developmentKeys(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".pub"));
  } catch {
    return [];
  }
  return names.sort().filter((n) => {
    try {
      return readFileSync(join(dir, n), "utf8").startsWith(DEVELOPMENT_KEY_MARK);
    } catch {
      return false;
    }
  });
}
