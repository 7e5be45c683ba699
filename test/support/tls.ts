// A self-signed certificate for localhost/127.0.0.1/::1, made once with openssl and
// shared by every test process (made in a private folder, then renamed into place).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestCert {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

let cached: TestCert | null = null;

/** A self-signed RSA certificate for localhost, 127.0.0.1 and ::1, valid for `days`, written to the two files. */
export function selfSignedCert(certFile: string, keyFile: string, days: number): TestCert {
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      String(days),
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
    ],
    { stdio: "ignore" },
  );
  return { certFile, keyFile, cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
}

export function testCert(): TestCert {
  const dir = join(tmpdir(), "sitegate-test-tls-v1");
  const certFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  if (cached && existsSync(certFile)) return cached;
  if (!existsSync(certFile)) {
    const work = mkdtempSync(join(tmpdir(), "sitegate-tls-"));
    selfSignedCert(join(work, "cert.pem"), join(work, "key.pem"), 3650);
    try {
      renameSync(work, dir);
    } catch {
      rmSync(work, { recursive: true, force: true }); // another process won the race
    }
  }
  cached = { certFile, keyFile, cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
  return cached;
}

/**
 * Another self-signed certificate for the same names, trusted by nobody: a partner or
 * broker presenting it must be refused. Made per call in `dir`.
 */
export function untrustedCert(dir: string): TestCert {
  return selfSignedCert(join(dir, "untrusted-cert.pem"), join(dir, "untrusted-key.pem"), 30);
}
