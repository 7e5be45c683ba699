// Secrets kept in files of their own instead of the config: `partner.headers[].value_file`
// and `fleet.password_file` (for systemd credentials, LoadCredential= under
// $CREDENTIALS_DIRECTORY, or a 0600 file). Read once at start; one trailing newline is
// dropped (what `echo` leaves). And the start-up check that the config file and these
// files cannot be read by other users of the box.
import { readFileSync, statSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import type { ErrorDetail } from "../errors.js";
import type { Config } from "./schema.js";

function readSecret(file: string): string {
  return readFileSync(file, "utf8").replace(/\r?\n$/, "");
}

/**
 * Resolves every `*_file` secret against `baseDir` and puts the file's content in its
 * plain twin. Returns a problem per file that cannot be read (the config is then invalid).
 */
export function loadSecretFiles(cfg: Config, baseDir: string): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  const at = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  const read = (path: string, file: string, set: (v: string) => void) => {
    try {
      set(readSecret(file));
    } catch (e) {
      out.push({ path, message: `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` });
    }
  };
  cfg.partner.headers.forEach((h, i) => {
    if (h.value_file === undefined) return;
    h.value_file = at(h.value_file);
    read(`partner.headers[${i}].value_file`, h.value_file, (v) => (h.value = v));
  });
  const fleet = cfg.fleet;
  if (fleet?.password_file !== undefined) {
    fleet.password_file = at(fleet.password_file);
    read("fleet.password_file", fleet.password_file, (v) => (fleet.password = v));
  }
  return out;
}

/** The files that hold secrets: the config itself, then each `*_file` secret. */
export function secretFiles(configFile: string, cfg: Config): string[] {
  const files = [resolve(configFile)];
  for (const h of cfg.partner.headers) if (h.value_file) files.push(h.value_file);
  if (cfg.fleet?.password_file) files.push(cfg.fleet.password_file);
  if (cfg.fleet?.key_file) files.push(cfg.fleet.key_file);
  files.push(cfg.http.tls.key);
  return files;
}

/** A warning per secret file other users can read (mode o+r), e.g. a config left 0644. */
export function readableByOthers(files: string[]): Array<{ file: string; mode: string }> {
  const out: Array<{ file: string; mode: string }> = [];
  for (const file of files) {
    try {
      const mode = statSync(file).mode & 0o777;
      if (mode & 0o004) out.push({ file, mode: mode.toString(8).padStart(4, "0") });
    } catch {
      // a file that went away is loadConfig's problem, not this check's
    }
  }
  return out;
}
