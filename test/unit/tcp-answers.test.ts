// The watch that tells a Modbus TCP transport when answers stop matching their requests
// (src/modbus/tcp-answers.ts), driven frame by frame with a stand-in for modbus-serial's port.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { AnswerWatch, TIMEOUTS_BEFORE_REOPEN, type TcpPortIds } from "../../src/modbus/tcp-answers.js";

function port(): TcpPortIds & { frame(id: number): void } {
  const p = new EventEmitter() as TcpPortIds & { frame(id: number): void };
  p._transactionIdWrite = 1;
  p.frame = (id) => {
    p._transactionIdRead = id;
    p.emit("data", Buffer.alloc(5));
  };
  return p;
}

test("a late answer to a timed-out request is stale and no reason to reconnect; its own answer is", () => {
  const p = port();
  const w = new AnswerWatch(p);
  w.begin(); // id 1
  p._transactionIdWrite = 2;
  assert.equal(w.timedOut(), false, "one timeout");
  w.begin(); // id 2
  p.frame(1); // the late answer to 1
  assert.equal(w.stale, 1);
  p.frame(2);
  w.answered();
  p._transactionIdWrite = 3;
  w.begin();
  p.frame(3); // the answer came, yet the library reported a timeout: it no longer hears this socket
  assert.equal(w.timedOut(), true);
});

test(`${TIMEOUTS_BEFORE_REOPEN} timeouts in a row drop the connection; an answer in between resets the count`, () => {
  const p = port();
  const w = new AnswerWatch(p);
  for (let i = 1; i < TIMEOUTS_BEFORE_REOPEN; i++) {
    w.begin();
    assert.equal(w.timedOut(), false, `timeout ${i}`);
  }
  w.begin();
  w.answered();
  for (let i = 1; i < TIMEOUTS_BEFORE_REOPEN; i++) {
    w.begin();
    assert.equal(w.timedOut(), false, `after an answer, timeout ${i}`);
  }
  w.begin();
  assert.equal(w.timedOut(), true);
});
