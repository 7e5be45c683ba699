// The one error hierarchy, kept: every error src throws is a SitegateError, no module but
// services/errors.ts maps an error to a status, no control flow reads message text; and
// storage turns a real SQLite failure into STORAGE_UNAVAILABLE, answered 503 everywhere.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { SitegateError, isSitegateError } from "../../src/errors.js";
import { EXIT_FAILURE, EXIT_USAGE, asSitegateError, errorAnswer, exitCode } from "../../src/services/errors.js";
import { openDatabase, storageError, type Db } from "../../src/storage/db.js";
import { commitDurably, withFullSync } from "../../src/storage/durable.js";
import { failure } from "../../src/fleet/commands.js";
import { UsageError } from "../../src/cli/command.js";
import { BundleRefused } from "../../src/update/bundle-format.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";

const SRC = resolve(fileURLToPath(import.meta.url), "../../../../src");

function sources(dir = SRC): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith(".ts")) out.push({ file: relative(SRC, p), text: readFileSync(p, "utf8") });
  }
  return out;
}

/** `file:line: text` of every line matching `re`, outside the files in `except`. */
function hits(re: RegExp, except: Record<string, string> = {}): string[] {
  const out: string[] = [];
  for (const { file, text } of sources()) {
    if (file in except) continue;
    text.split("\n").forEach((line, i) => {
      if (re.test(line)) out.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return out;
}

test("src throws no plain Error: every error is a SitegateError with a code", () => {
  assert.deepEqual(hits(/new (Error|TypeError|RangeError|SyntaxError)\(/), []);
});

test("every error class in src derives from SitegateError, and only SitegateError extends Error", () => {
  const bases = new Map<string, string>();
  for (const { text } of sources()) for (const m of text.matchAll(/class (\w+) extends (\w+)/g)) bases.set(m[1], m[2]);
  assert.equal(bases.get("SitegateError"), "Error");
  assert.deepEqual(hits(/extends (Error|TypeError|RangeError)\b/, { "errors.ts": "the base" }), []);
  const reachesError = (c: string): boolean => c === "Error" || (bases.has(c) && reachesError(bases.get(c)!));
  const viaBase = (c: string): boolean => c === "SitegateError" || (bases.has(c) && viaBase(bases.get(c)!));
  const errorClasses = [...bases.keys()].filter(reachesError).filter((c) => c !== "SitegateError");
  assert.ok(errorClasses.length >= 5, `found ${errorClasses.join(", ")}`);
  assert.deepEqual(
    errorClasses.filter((c) => !viaBase(c)),
    [],
  );
});

test("no status is mapped outside services/errors.ts", () => {
  const except = {
    "services/errors.ts": "the one table",
    // RFC 6749 5.2: the token endpoint's own error vocabulary (invalid_client 401, the rest 400).
    "api/token.ts": "oauthError",
  };
  assert.deepEqual(
    hits(/\.code\([^)]*\b[45]\d\d\b|statusCode:\s*[45]\d\d|errorAnswer\(\s*\d|HttpError\(\s*\d/, except),
    [],
    "a status literal in a reply or an error answer",
  );
  assert.deepEqual(
    hits(
      /error:\s*"(unauthorized|forbidden|not_found|conflict|unavailable|rate_limited|payload_too_large|unsupported_media_type|internal)"/,
      except,
    ),
    [],
    "a B3 error code written by hand",
  );
  const token = sources().find((s) => s.file === "api/token.ts")!.text;
  assert.deepEqual(
    token.split("\n").filter((l) => /\b[45]\d\d\b/.test(l) && !/^\s*(\/\/|\/?\*)/.test(l)),
    ['    .code(error === "invalid_client" ? 401 : 400)'],
    "api/token.ts: only the RFC 6749 pair",
  );
});

test("one error builder: errorAnswer is defined in services/errors.ts only (the fleet's command answers wrap it)", () => {
  assert.deepEqual(hits(/function errorAnswer\b|const errorAnswer\b/, { "services/errors.ts": "the one builder" }), []);
});

test("no control flow reads an error's message text", () => {
  const except = {
    // The library boundary: modbus-serial reports timeouts, CRC and closed ports only in text.
    "modbus/transport.ts": "mapModbusError",
    // zod's issue text for a missing key, not an error of ours.
    "util/zod-issues.ts": "issuesToDetails",
  };
  assert.deepEqual(
    hits(
      /\/[^/\n]+\/[a-z]*\.test\((errorMessage\(|\w+\.message\b|msg\b)|\.message\.(includes|startsWith|endsWith|match)\(|errorMessage\([^)]*\)\.(includes|startsWith|endsWith|match)\(/,
      except,
    ),
    [],
  );
});

test("SQLite's result codes are read in src/storage only", () => {
  const outside = hits(/SQLITE_/).filter((h) => !h.startsWith("storage/"));
  assert.deepEqual(outside, []);
});

test("the one table: codes to HTTP status, B3 code and CLI exit code; an internal error's text is not shown", () => {
  const a = (code: ConstructorParameters<typeof SitegateError>[0]) => errorAnswer(new SitegateError(code, "m"));
  assert.deepEqual([a("INVALID_REQUEST").status, a("INVALID_REQUEST").code], [400, "invalid_request"]);
  assert.deepEqual([a("BUSY").status, a("BUSY").code], [409, "conflict"]);
  assert.deepEqual([a("RATE_LIMITED").status, a("RATE_LIMITED").code], [429, "rate_limited"]);
  assert.deepEqual([a("STORAGE_UNAVAILABLE").status, a("STORAGE_UNAVAILABLE").code], [503, "unavailable"]);
  assert.deepEqual(a("MODBUS_TIMEOUT"), { status: 500, code: "internal", message: "internal error", details: [] });
  assert.equal(exitCode(new UsageError("u")), EXIT_USAGE);
  assert.equal(exitCode(new BundleRefused("refused")), EXIT_USAGE);
  assert.equal(exitCode(new SitegateError("CONFIG_INVALID", "c")), EXIT_USAGE);
  assert.equal(exitCode(new SitegateError("STORAGE_UNAVAILABLE", "s")), EXIT_FAILURE);
  assert.equal(exitCode(new Error("a library's")), EXIT_FAILURE);
  // The HTTP framework's own refusals by their status; anything else is a bug.
  assert.equal(asSitegateError(Object.assign(new SyntaxError("bad JSON"), { statusCode: 400 })).code, "INVALID_REQUEST");
  assert.equal(asSitegateError(Object.assign(new Error("too big"), { statusCode: 413 })).code, "PAYLOAD_TOO_LARGE");
  assert.deepEqual(errorAnswer(asSitegateError(new Error("boom at /secret/path"))), {
    status: 500,
    code: "internal",
    message: "internal error",
    details: [],
  });
});

/** A database with one table, on a real file. */
async function withDb(fn: (db: Db, dir: string) => void | Promise<void>): Promise<void> {
  await withTmpDir(async (dir) => {
    const db = openDatabase(dir);
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)");
    try {
      await fn(db, dir);
    } finally {
      db.close();
    }
  });
}

function assertUnavailable(fn: () => unknown, sqlite: RegExp): SitegateError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(isSitegateError(caught, "STORAGE_UNAVAILABLE"), `not STORAGE_UNAVAILABLE: ${String(caught)}`);
  assert.equal(caught.transient, true);
  assert.match(String((caught.cause as { code?: string }).code), sqlite);
  return caught;
}

test("storage: a read-only database cannot commit: STORAGE_UNAVAILABLE, transient; nothing stored", async () => {
  await withDb((db) => {
    db.pragma("query_only = ON");
    assertUnavailable(() => commitDurably(db, () => db.prepare("INSERT INTO t (v) VALUES (?)").run(Buffer.alloc(10))), /^SQLITE_READONLY/);
    db.pragma("query_only = OFF");
    assert.equal(db.prepare("SELECT count(*) FROM t").pluck().get(), 0);
  });
});

test("storage: a full database cannot commit: STORAGE_UNAVAILABLE, answered 503 by the API table and the fleet command", async () => {
  await withDb((db) => {
    const pages = db.pragma("page_count", { simple: true }) as number;
    db.pragma(`max_page_count = ${pages + 2}`);
    const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
    const e = assertUnavailable(
      () =>
        withFullSync(
          db,
          db.transaction(() => insert.run(Buffer.alloc(64 * 1024))),
        ),
      /^SQLITE_FULL/,
    );
    assert.equal(db.prepare("SELECT count(*) FROM t").pluck().get(), 0, "the transaction rolled back");
    assert.deepEqual({ ...errorAnswer(e), message: "" }, { status: 503, code: "unavailable", message: "", details: [] });
    assert.match(errorAnswer(e).message, /nothing was stored/);
    const answer = failure("configure", e, { log: silentLogger() });
    assert.equal(answer.status, 503);
    assert.equal(answer.body.error, "unavailable");
  });
});

test("storage: a write lock held by another connection: STORAGE_UNAVAILABLE; other SQLite errors pass through as they are", async () => {
  await withDb((db, dir) => {
    db.pragma("busy_timeout = 0");
    const other = new Database(join(dir, "sitegate.db"));
    other.exec("BEGIN IMMEDIATE");
    try {
      assertUnavailable(() => commitDurably(db, () => db.prepare("INSERT INTO t (v) VALUES (x'00')").run()), /^SQLITE_BUSY/);
    } finally {
      other.exec("ROLLBACK");
      other.close();
    }
    db.prepare("INSERT INTO t (id, v) VALUES (1, x'00')").run();
    let dup: unknown;
    try {
      commitDurably(db, () => db.prepare("INSERT INTO t (id, v) VALUES (1, x'00')").run());
    } catch (e) {
      dup = e;
    }
    assert.ok(!(dup instanceof SitegateError), "a constraint failure is a bug of the caller, not unavailable storage");
    assert.match(String((dup as { code?: string }).code), /^SQLITE_CONSTRAINT/);
    assert.equal(storageError(dup), dup);
  });
});
