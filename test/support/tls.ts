// A self-signed certificate for localhost/127.0.0.1, made once per process with openssl.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestCert {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

let cached: TestCert | null = null;

export function testCert(dir = join(tmpdir(), `sitegate-tls-${process.pid}`)): TestCert {
  if (cached && existsSync(cached.certFile)) return cached;
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  if (!existsSync(certFile)) {
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile,
      "-days", "365", "-subj", "/CN=localhost",
      "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
    ], { stdio: "ignore" });
  }
  cached = { certFile, keyFile, cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
  return cached;
}
