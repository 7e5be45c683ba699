// The running release's version, as package.json gives it.
import { readFileSync } from "node:fs";

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
