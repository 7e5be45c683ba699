// The strace reader of the durable-answer tests: a main-thread call that another thread's
// line interrupted ("<unfinished ...>", then "<... NAME resumed>") keeps its place and gets
// its result from the resumed line. A loaded machine interleaves threads so; before, the
// accept4 of such a call was not found and durable-ack failed under load.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { acceptCall, answerWrite, mainThreadCalls } from "../support/strace.js";
import { withTmpDir } from "../support/tmp.js";

test("an interrupted accept4 and write of the main thread are read from their resumed lines", () =>
  withTmpDir((dir) => {
    const file = join(dir, "t.trace");
    writeFileSync(
      file,
      [
        "100 10:00:00.000001 accept4(19<TCP:[127.0.0.1:8443]>, <unfinished ...>",
        "101 10:00:00.000002 fdatasync(20</data/sitegate.db-wal>) = 0",
        "100 10:00:00.000003 <... accept4 resumed>{sa_family=AF_INET}, [16], SOCK_CLOEXEC) = 23<TCP:[127.0.0.1:8443->127.0.0.1:5555]>",
        '100 10:00:00.000004 read(23<TCP:[127.0.0.1:8443->127.0.0.1:5555]>, ""..., 65536) = 517',
        '100 10:00:00.000005 write(23<TCP:[127.0.0.1:8443->127.0.0.1:5555]>, ""..., 300 <unfinished ...>',
        '101 10:00:00.000006 write(20</data/sitegate.db-wal>, ""..., 4096) = 4096',
        "100 10:00:00.000007 <... write resumed>) = 300",
        "",
      ].join("\n"),
    );
    const calls = mainThreadCalls(file, 100);
    assert.deepEqual(
      calls.map((c) => [c.name, c.ret]),
      [
        ["accept4", 23],
        ["read", 517],
        ["write", 300],
      ],
    );
    assert.equal(acceptCall(calls, 5555), 0);
    assert.equal(answerWrite(calls, 5555), 2);
  }));
