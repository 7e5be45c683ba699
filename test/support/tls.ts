// A self-signed certificate for localhost/127.0.0.1/::1, made once with openssl and
// shared by every test process (made in a private folder, then renamed into place). It
// is valid from 2000 to 2099, not from the moment it was made: a suite run with the
// clock set back (libfaketime) still trusts the one an earlier run left on disk.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

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

/** The CA configuration `openssl ca` needs to sign a request with its own key and fixed dates. */
const SELF_SIGN_CNF = `[ca]
default_ca = here
[here]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
x509_extensions = ext
[any]
commonName = supplied
[ext]
basicConstraints = critical, CA:TRUE
subjectKeyIdentifier = hash
`;

/**
 * A self-signed certificate like selfSignedCert's, valid from 2000-01-01 to 2099-12-31
 * whatever the clock reads (`openssl req -x509` of OpenSSL 3.0 cannot set a start date).
 */
function clockProofCert(work: string): void {
  const at = (f: string) => join(work, f);
  writeFileSync(at("ca.cnf"), SELF_SIGN_CNF);
  writeFileSync(at("index.txt"), "");
  writeFileSync(at("serial"), "01\n");
  const run = (args: string[]) => execFileSync("openssl", args, { cwd: work, stdio: "ignore" });
  run([
    "req",
    "-new",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "key.pem",
    "-out",
    "csr.pem",
    "-subj",
    "/CN=localhost",
    "-addext",
    "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
  ]);
  const dates = ["-startdate", "20000101000000Z", "-enddate", "20991231235959Z"];
  run(["ca", "-batch", "-selfsign", "-notext", "-config", "ca.cnf", "-keyfile", "key.pem", "-in", "csr.pem", "-out", "cert.pem", ...dates]);
}

export function testCert(): TestCert {
  const dir = join(tmpdir(), "sitegate-test-tls-v2");
  if (cached && existsSync(cached.certFile)) return cached;
  cached = certIn(dir);
  return cached;
}

/**
 * The clock-proof certificate in `dir` (cert.pem, key.pem), made there if it is not yet:
 * in a private folder beside it, then renamed into place. `make run` keeps its own in the
 * demo's folder, inside the clone, not under a fixed name every user of the machine shares.
 */
export function certIn(dir: string): TestCert {
  const certFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  if (!existsSync(certFile)) {
    const work = mkdtempSync(join(dirname(dir), "sitegate-tls-"));
    clockProofCert(work);
    try {
      renameSync(work, dir);
    } catch {
      rmSync(work, { recursive: true, force: true }); // another process won the race
    }
  }
  return { certFile, keyFile, cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
}

/**
 * Another self-signed certificate for the same names, trusted by nobody: a partner or
 * broker presenting it must be refused. Made per call in `dir`.
 */
export function untrustedCert(dir: string): TestCert {
  return selfSignedCert(join(dir, "untrusted-cert.pem"), join(dir, "untrusted-key.pem"), 30);
}
