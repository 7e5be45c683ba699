// The files the gateway cannot start without, read and parsed as run uses them: the HTTPS
// certificate and key (a pair), the extra CA files, the fleet's client certificate. A
// file that exists but is a directory, unreadable, not PEM, or a key of another
// certificate is refused here, by check-config and run alike. Serial ports are not
// checked: a USB adapter may appear after the gateway starts, and the bus reconnects.
import { readFileSync } from "node:fs";
import { createSecureContext, rootCertificates } from "node:tls";
import type { ErrorDetail } from "../errors.js";
import type { Config } from "./schema.js";

type Read = { ok: true; text: string } | { ok: false; problem: ErrorDetail };

function read(path: string, file: string): Read {
  try {
    return { ok: true, text: readFileSync(file, "utf8") };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === "EISDIR" ? "it is a directory" : code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : code;
    return { ok: false, problem: { path, message: `cannot read ${file} (${why ?? (e as Error).message})` } };
  }
}

/** TLS's own words, without the OpenSSL routine names. */
function tlsReason(e: unknown): string {
  return ((e as Error).message.split(":").pop() ?? "").trim() || (e as Error).message;
}

/** A certificate and its key: both readable PEM, and the key the certificate's. */
function pair(certPath: string, cert: string, keyPath: string, key: string): ErrorDetail[] {
  const c = read(certPath, cert);
  const k = read(keyPath, key);
  const out = [c, k].flatMap((r) => (r.ok ? [] : [r.problem]));
  if (!c.ok || !k.ok) return out;
  try {
    createSecureContext({ cert: c.text, key: k.text });
    return [];
  } catch (e) {
    return [{ path: certPath, message: `${cert} and ${key} are not a PEM certificate and its key (${tlsReason(e)})` }];
  }
}

/** Extra CA certificates (PEM), added to the public roots as the callers do. */
function caFile(path: string, file: string): ErrorDetail[] {
  const r = read(path, file);
  if (!r.ok) return [r.problem];
  if (!r.text.includes("-----BEGIN CERTIFICATE-----")) return [{ path, message: `${file} holds no PEM certificate` }];
  try {
    createSecureContext({ ca: [...rootCertificates, r.text] });
    return [];
  } catch (e) {
    return [{ path, message: `${file} is not a PEM certificate (${tlsReason(e)})` }];
  }
}

/** Every problem with the files of a parsed config whose paths are already absolute. */
export function fileProblems(cfg: Config): ErrorDetail[] {
  const out = pair("http.tls.cert", cfg.http.tls.cert, "http.tls.key", cfg.http.tls.key);
  if (cfg.partner.ca_file) out.push(...caFile("partner.ca_file", cfg.partner.ca_file));
  const f = cfg.fleet;
  if (f?.ca_file) out.push(...caFile("fleet.ca_file", f.ca_file));
  if (f?.cert_file && f.key_file) out.push(...pair("fleet.cert_file", f.cert_file, "fleet.key_file", f.key_file));
  if (cfg.zigbee?.ca_file) out.push(...caFile("zigbee.ca_file", cfg.zigbee.ca_file));
  return out;
}
