import { test } from "node:test";
import assert from "node:assert/strict";
import { fstatSync, openSync, closeSync } from "node:fs";
import { createLogger, journalAttached, syslogPriority } from "../../src/log.js";

test("with the journal attached every line starts with its syslog priority (journalctl -p warning)", () => {
  const lines: string[] = [];
  const log = createLogger({
    level: "trace",
    destination: { write: (s: string) => lines.push(s) } as unknown as NodeJS.WritableStream,
    journal: true,
  });
  log.fatal("f");
  log.error("e");
  log.warn("w");
  log.info("i");
  log.debug("d");
  assert.deepEqual(
    lines.map((l) => /^<(\d)>\{/.exec(l)?.[1]),
    ["2", "3", "4", "6", "7"],
  );
  assert.equal(JSON.parse(lines[1].slice(3)).msg, "e", "the rest of the line is the JSON record");
  assert.equal(syslogPriority(45), 4);
});

test("without the journal, lines are plain JSON", () => {
  const lines: string[] = [];
  createLogger({ destination: { write: (s: string) => lines.push(s) } as unknown as NodeJS.WritableStream, journal: false }).error("e");
  assert.match(lines[0], /^\{/);
});

test("JOURNAL_STREAM counts only when it names the descriptor's device:inode", () => {
  const fd = openSync("/dev/null", "w");
  try {
    const st = fstatSync(fd, { bigint: true });
    assert.equal(journalAttached({ JOURNAL_STREAM: `${st.dev}:${st.ino}` }, fd), true);
    assert.equal(journalAttached({ JOURNAL_STREAM: `${st.dev}:${st.ino + 1n}` }, fd), false, "stdout redirected elsewhere");
    assert.equal(journalAttached({}, fd), false);
    assert.equal(journalAttached({ JOURNAL_STREAM: "junk" }, fd), false);
  } finally {
    closeSync(fd);
  }
});
