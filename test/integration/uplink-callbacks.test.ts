// Callbacks never stall a lane: 2xx settles, a redirect is followed once and to the same
// origin only, Retry-After is honoured, a message the partner refuses with a final 4xx
// becomes a dead letter at once (listed and retried by `sitegate outbox`) while the lane
// goes on, 401/403/404 hold the lane (health warning, nothing dead-lettered) until the
// partner answers 2xx, and it drains in order,
// execution responses have a lane of their own, and
// the data push keeps up to 4 requests in flight. Real HTTPS sink, real SQLite.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { withTmpDir } from "../support/tmp.js";
import { snapshot, startUplink, type UplinkRig } from "../support/uplink-harness.js";
import { runCli as cli } from "../support/cli.js";
import { testConfigInput } from "../support/config.js";
import { startGateway } from "../support/gateway.js";
import { until } from "../support/wait.js";
import { startSink, type PartnerSink, partnerTo } from "../support/partner-sink.js";
import type { Uplink } from "../../src/uplink/uplink.js";
import { HTTPS, queueCallback } from "../../src/uplink/callbacks.js";

/** A sink, a temp dir and an uplink rig on it, all stopped afterwards. */
async function withRig(
  over: Parameters<typeof startUplink>[2],
  fn: (sink: PartnerSink, rig: UplinkRig, dir: string) => Promise<void>,
): Promise<void> {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      const rig = await startUplink(dir, sink, over);
      try {
        await fn(sink, rig, dir);
      } finally {
        await rig.stop();
      }
    });
  } finally {
    await sink.stop();
  }
}

const keys = (rs: Array<{ headers: Record<string, unknown> }>) => rs.map((r) => r.headers["idempotency-key"] as string);

test("a partner answering 204 or 202 has the message: settled once, never sent again", async () => {
  await withRig({}, async (sink, rig) => {
    sink.decide = (r) => ({ status: r.path === "/exec" ? 202 : 204 });
    for (let i = 0; i < 3; i++) rig.samples.append(snapshot(i));
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-1", status: "completed" });
    await until(() => rig.samples.stats().pending_snapshots === 0 && rig.uplink.deliveryLog.size(HTTPS) === 0, "every message settled");
    rig.samples.append(snapshot(3));
    await until(() => rig.samples.stats().pending_snapshots === 0, "the next push settled");
    assert.equal(sink.requests.length, 5, "each message sent once");
    assert.equal(new Set(keys(sink.requests)).size, 5);
  });
});

test("a redirect is followed once, to the same origin only; another origin (or http) never gets the partner headers, and the message is a dead letter at once", async () => {
  const other = await startSink();
  try {
    await withRig({}, async (sink, rig) => {
      sink.decide = (r) =>
        r.path === "/old"
          ? { status: 308, headers: { location: `${sink.url}/new` } }
          : r.path === "/plain"
            ? { status: 307, headers: { location: `http://127.0.0.1:${sink.port}/new` } }
            : r.path === "/away"
              ? { status: 308, headers: { location: `${other.url}/exec` } }
              : undefined;
      queueCallback(rig.uplink.deliveryLog, "notice", `${sink.url}/plain`, { n: 0 });
      queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/away`, { event_id: "e-away" });
      queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/old`, { event_id: "e-r" });
      await sink.waitFor(() => sink.accepted("/new").length === 1, 10000, "the redirected POST");
      const [moved] = sink.accepted("/new");
      assert.deepEqual(moved.body, { event_id: "e-r" }, "the message after the refused redirect is not held back");
      assert.equal(moved.headers["idempotency-key"], sink.requests.find((r) => r.path === "/old")!.headers["idempotency-key"]);
      assert.equal(moved.headers["x-partner-key"], "k-123", "same origin: the partner headers go along");
      // e-away went first in the same lane: whatever it did is done.
      assert.deepEqual(
        other.requests.map((r) => r.path),
        [],
        "the other origin received nothing: no partner headers, no body",
      );
      await until(
        () => rig.uplink.deliveryLog.size(HTTPS) === 0 && rig.uplink.deadLetterCount() === 2,
        "both refused redirects dead-lettered",
      );
      assert.equal(sink.requests.filter((r) => r.path === "/away").length, 1, "not retried");
      assert.equal(sink.requests.filter((r) => r.path === "/plain").length, 1, "not retried");
      const errors = rig.uplink.deliveryLog
        .deadLetters(HTTPS)
        .map((d) => d.last_error ?? "")
        .sort();
      assert.match(errors[0], new RegExp(`HTTP 307 to another origin \\(http://127\\.0\\.0\\.1:${sink.port}\\) not followed`));
      assert.match(errors[1], new RegExp(`HTTP 308 to another origin \\(${other.url.replace(/\./g, "\\.")}\\) not followed`));
    });
  } finally {
    await other.stop();
  }
});

test("429 with Retry-After waits as told, then delivers", async () => {
  await withRig({}, async (sink, rig) => {
    let first = true;
    sink.decide = () => {
      if (!first) return undefined;
      first = false;
      return { status: 429, headers: { "retry-after": "1" } };
    };
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-429" });
    await sink.waitFor(() => sink.accepted("/exec").length === 1, 10000, "the retry");
    const [a, b] = sink.requests;
    assert.equal(a.status, 429);
    assert.ok(b.at - a.at >= 950, `retried ${b.at - a.at} ms after a Retry-After of 1 s`);
  });
});

test("429 with Retry-After as an HTTP date waits until that date, then delivers", async () => {
  await withRig({}, async (sink, rig) => {
    let until429: number | null = null;
    sink.decide = () => {
      if (until429 !== null) return undefined;
      // HTTP dates have whole seconds: the next whole second plus one, so the wait is 1..2 s
      // (the rig's own backoff is 50 ms: without the date the retry comes far earlier).
      until429 = (Math.floor(Date.now() / 1000) + 2) * 1000;
      return { status: 429, headers: { "retry-after": new Date(until429).toUTCString() } };
    };
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-429-date" });
    await sink.waitFor(() => sink.accepted("/exec").length === 1, 10000, "the retry");
    const [a, b] = sink.requests;
    assert.equal(a.status, 429);
    assert.match(String(a.body.event_id), /e-429-date/);
    assert.equal(sink.requests.length, 2, "no attempt before the date");
    assert.ok(
      b.at >= until429! - 5,
      `retried at ${new Date(b.at).toISOString()}, before the Retry-After date ${new Date(until429!).toISOString()}`,
    );
  });
});

test("execution responses travel in their own lane: a failing kind never holds them back", async () => {
  await withRig({}, async (sink, rig) => {
    sink.decide = (r) => (r.path === "/other" ? { status: 503 } : undefined);
    queueCallback(rig.uplink.deliveryLog, "device_report", `${sink.url}/other`, { n: 1 });
    await sink.waitFor(() => sink.requests.some((r) => r.path === "/other"), 5000, "the failing kind tried");
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-2" });
    await sink.waitFor(() => sink.accepted("/exec").length === 1, 10000, "the execution response");
    assert.equal(rig.uplink.deliveryLog.pending(HTTPS).filter((m) => m.lane === "device_report").length, 1, "the other kind still waits");
    await until(() => rig.uplink.stats().execution.sent === 1, "the execution lane's bookkeeping");
    assert.ok(rig.uplink.stats().device_report.failures >= 1);
  });
});

test("queueCallback: a caller's idempotency key is kept and never queued twice; bad input is refused", async () => {
  await withRig({}, async (sink, rig) => {
    await sink.refuse();
    const a = queueCallback(
      rig.uplink.deliveryLog,
      "execution_response",
      `${sink.url}/exec`,
      { event_id: "e-3" },
      { idempotencyKey: "evt-e-3-final" },
    );
    const b = queueCallback(
      rig.uplink.deliveryLog,
      "execution_response",
      `${sink.url}/exec`,
      { event_id: "e-3" },
      { idempotencyKey: "evt-e-3-final" },
    );
    assert.deepEqual(a, b);
    assert.equal(a.idempotency_key, "evt-e-3-final");
    assert.equal(rig.uplink.deliveryLog.size(HTTPS), 1);
    assert.throws(
      () => queueCallback(rig.uplink.deliveryLog, "execution_response", "http://partner.example/exec", {}),
      /https:\/\/ URLs only/,
    );
    assert.throws(() => queueCallback(rig.uplink.deliveryLog, "Execution Response", `${sink.url}/exec`, {}), /snake_case/);
    assert.throws(
      () => queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, {}, { idempotencyKey: "" }),
      /idempotencyKey/,
    );
    await sink.accept();
    await sink.waitFor(() => sink.accepted("/exec").length === 1, 10000, "the message");
    assert.equal(sink.accepted("/exec")[0].headers["idempotency-key"], "evt-e-3-final");
  });
});

test("a message the partner refuses (400) is dead-lettered at once, without a retry; the next messages are not held back; `sitegate outbox retry` sends it", async () => {
  await withRig({ idleRecheckMs: 200 }, async (sink, rig, dir) => {
    let reject = true;
    sink.decide = (r) => (reject && r.body?.event_id === "e-bad" ? { status: 400 } : undefined);
    const bad = queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-bad" });
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-next" });
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-last" });
    await sink.waitFor(() => sink.accepted("/exec").length === 2, 15000, "the later messages");
    assert.deepEqual(
      sink.accepted("/exec").map((r) => r.body.event_id),
      ["e-next", "e-last"],
      "in order, after the dead letter",
    );
    assert.equal(sink.requests.filter((r) => r.body?.event_id === "e-bad").length, 1, "final: sent once, never retried");
    await until(() => rig.uplink.deliveryLog.size(HTTPS) === 0, "the lane empty");
    assert.equal(rig.uplink.deadLetterCount(), 1);

    const configFile = join(dir, "config.yaml");
    writeFileSync(configFile, stringify(testConfigInput(dir)));
    const listed = await cli("outbox", "--config", configFile, "--json");
    assert.equal(listed.code, 0, listed.stderr);
    const view = JSON.parse(listed.stdout);
    assert.equal(view.pending.length, 0);
    assert.equal(view.dead_letters.length, 1);
    const dl = view.dead_letters[0];
    assert.equal(dl.lane, "execution");
    assert.equal(dl.kind, "execution_response");
    assert.equal(dl.idempotency_key, bad.idempotency_key);
    assert.deepEqual(JSON.parse(dl.body), { event_id: "e-bad" });
    assert.match(dl.last_error, /HTTP 400/);
    const text = await cli("outbox", "--config", configFile);
    assert.match(text.stdout, /dead letters: 1/);

    const wrong = await cli("outbox", "retry", "999", "--config", configFile);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /no dead letter with id 999/);
    assert.equal((await cli("outbox", "retry", "--config", configFile)).code, 2, "retry without ids or --all is a usage error");

    reject = false;
    const retried = await cli("outbox", "retry", String(dl.id), "--config", configFile);
    assert.equal(retried.code, 0, retried.stderr);
    await sink.waitFor(() => sink.accepted("/exec").some((r) => r.body.event_id === "e-bad"), 15000, "the retried dead letter");
    assert.equal(
      sink.accepted("/exec").find((r) => r.body.event_id === "e-bad")!.headers["idempotency-key"],
      bad.idempotency_key,
      "same key as before",
    );
    await until(() => rig.uplink.deadLetterCount() === 0 && rig.uplink.deliveryLog.size(HTTPS) === 0, "nothing left");
  });
});

test("a data push the partner rejects is dead-lettered with its payload, the cursor moves on, and a retry sends it", async () => {
  await withRig({ idleRecheckMs: 200 }, async (sink, rig, dir) => {
    let reject = true;
    sink.decide = (r) => (reject && r.body?.devices?.[0]?.metrics?.energy_import_wh === 100002 ? { status: 422 } : undefined);
    for (let i = 0; i < 6; i++) rig.samples.append(snapshot(i));
    await until(() => rig.samples.stats().pending_snapshots === 0, "the cursor past the rejected snapshot");
    const seqs = new Set(sink.accepted().map((r) => r.body.devices[0].metrics.energy_import_wh - 100000));
    assert.deepEqual(
      [...seqs].sort((a, b) => a - b),
      [0, 1, 3, 4, 5],
    );
    const [dead] = rig.uplink.deliveryLog.deadLetters(HTTPS);
    assert.equal(dead.lane, "data_push");
    assert.equal(JSON.parse(dead.body).timestamp, new Date(snapshot(2).ts).toISOString(), "the snapshot's payload, as it was");
    rig.samples.append(snapshot(6));
    await sink.waitFor(() => sink.accepted().some((r) => r.body.devices[0].metrics.energy_import_wh === 100006), 10000, "later pushes");

    reject = false;
    const configFile = join(dir, "config.yaml");
    writeFileSync(configFile, stringify(testConfigInput(dir)));
    const r = await cli("outbox", "retry", "--all", "--config", configFile);
    assert.equal(r.code, 0, r.stderr);
    await sink.waitFor(() => sink.accepted().some((x) => x.body.devices[0].metrics.energy_import_wh === 100002), 15000, "the retried push");
    assert.equal(
      sink.accepted().find((x) => x.body.devices[0].metrics.energy_import_wh === 100002)!.headers["idempotency-key"],
      dead.idempotency_key,
    );
  });
});

test("401, 403 and 404 hold the lane: nothing is dead-lettered, /healthz warns, and the lane drains in order once the partner answers 200", async () => {
  // The backoff is the transient one, shortened for the test (1 s doubling in production).
  await withRig({ backoff: (n) => Math.min(200, 25 * 2 ** (n - 1)) }, async (sink, rig) => {
    for (const status of [401, 403, 404]) {
      sink.mode = { kind: "status", status };
      const before = sink.requests.length;
      const ids = [0, 1, 2].map((i) => `${status}-${i}`);
      for (const id of ids) queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: id });
      const seqs = [0, 1, 2, 3, 4, 5].map((i) => status * 10 + i);
      for (const n of seqs) rig.samples.append(snapshot(n));
      // Held for a while: several refusals of the oldest message, and the lane did not move past it.
      await sink.waitFor(
        () => sink.requests.slice(before).filter((r) => r.path === "/exec" && r.status === status).length >= 4,
        15000,
        `the execution lane retried under ${status}`,
      );
      await until(() => rig.uplink.health().warnings.some((w) => w.lane === "execution" && w.status === status), "the warning");
      assert.deepEqual(
        new Set(
          sink.requests
            .slice(before)
            .filter((r) => r.path === "/exec")
            .map((r) => r.body.event_id),
        ),
        new Set([ids[0]]),
        "only the oldest response is tried while the lane is held",
      );
      assert.equal(rig.uplink.deadLetterCount(), 0, `a ${status} dead-letters nothing`);
      assert.equal(rig.uplink.deliveryLog.size(HTTPS), 3, "the responses wait in the lane");
      assert.ok(rig.samples.stats().pending_snapshots >= 6, "the snapshots wait too");
      assert.ok(rig.uplink.stats().execution!.credentials_rejections >= 3, "counted");

      const firstOk = sink.requests.length;
      sink.mode = { kind: "ok" };
      await until(() => rig.uplink.deliveryLog.size(HTTPS) === 0 && rig.samples.stats().pending_snapshots === 0, "the lane drained");
      const accepted = sink.requests.slice(firstOk).filter((r) => r.status === 200);
      assert.deepEqual(
        accepted.filter((r) => r.path === "/exec").map((r) => r.body.event_id),
        ids,
        "the responses in the order they were queued, each once",
      );
      const pushed = accepted.filter((r) => r.path !== "/exec").map((r) => r.body.devices[0].metrics.energy_import_wh - 100000);
      assert.deepEqual(
        [...pushed].sort((x, y) => x - y),
        seqs,
        "every snapshot of the held window reaches the partner",
      );
      assert.equal(rig.uplink.deadLetterCount(), 0);
      assert.deepEqual(rig.uplink.health().warnings, [], "the warning clears with the first 2xx");
    }
  });
});

test("a 400 beside a 401 spell: the 400 is final (one dead letter), the held 401s are not", async () => {
  await withRig({ backoff: (n) => Math.min(200, 25 * 2 ** (n - 1)) }, async (sink, rig) => {
    let auth = true;
    sink.decide = (r) => (r.body?.event_id === "bad" ? { status: 400 } : auth ? { status: 401 } : undefined);
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "bad" });
    queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "good" });
    await sink.waitFor(() => sink.requests.filter((r) => r.body?.event_id === "good").length >= 3, 15000, "good held by 401");
    assert.equal(rig.uplink.deadLetterCount(), 1, "only the 400");
    auth = false;
    await until(() => rig.uplink.deliveryLog.size(HTTPS) === 0, "drained");
    assert.equal(sink.accepted("/exec").length, 1);
    assert.equal(rig.uplink.deadLetterCount(), 1);
    assert.equal(sink.requests.filter((r) => r.body?.event_id === "bad").length, 1, "the 400 was never retried");
  });
});

test("/healthz shows refused credentials and /metrics counts them and the dead letters", async () => {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      sink.mode = { kind: "status", status: 403 };
      const gw = await startGateway(dir, {
        partner: partnerTo(sink, { headers: [] }),
      });
      try {
        const uplink = gw.daemon.part<Uplink>("uplink");
        queueCallback(uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-5" });
        await until(async () => (await gw.call("GET", "/healthz")).json.uplink.warnings.length === 1, "the warning in /healthz");
        const h = (await gw.call("GET", "/healthz")).json;
        assert.equal(h.uplink.warnings[0].lane, "execution");
        assert.equal(h.uplink.warnings[0].status, 403);
        uplink.deliveryLog.deadLetter(
          {
            consumer: HTTPS,
            lane: "execution",
            kind: "execution_response",
            address: `${sink.url}/exec`,
            body: "{}",
            idempotency_key: "k-dead",
            created_at: new Date().toISOString(),
            attempts: 3,
          },
          "HTTP 400",
        );
        const m = (await gw.call("GET", "/metrics")).text;
        // only the one added by hand: the refused response waits in its lane
        assert.match(m, /^sitegate_uplink_dead_letters 1$/m);
        assert.match(m, /^sitegate_uplink_credentials_rejected\{lane="execution"\} 1$/m);
        assert.match(m, /^sitegate_uplink_credentials_rejected_total\{lane="execution"\} [1-9]\d*$/m);
        assert.equal(uplink.deliveryLog.size(HTTPS), 1);
      } finally {
        await gw.stop();
      }
    });
  } finally {
    await sink.stop();
  }
});

test("a slow partner gets up to 4 data pushes at once, each with its own key, and the cursor follows the settled prefix", async () => {
  await withRig({}, async (sink, rig) => {
    // The partner holds every answer until 4 requests are in flight at once: the uplink
    // must get there (a backlog of 24), and cannot send a 5th while 4 are unanswered.
    let open: () => void = () => {};
    const gate = new Promise<void>((r) => (open = r));
    sink.decide = () => ({ status: 200, wait: gate });
    for (let i = 0; i < 24; i++) rig.samples.append(snapshot(i));
    await until(() => sink.inFlight === 4, "four data pushes held by the partner at once");
    assert.equal(rig.uplink.stats().data_push.in_flight, 4, "the uplink counts four in flight");
    open();
    await until(() => rig.samples.stats().pending_snapshots === 0, "the backlog drained", 30000);
    assert.equal(sink.maxInFlight, 4, "four requests in flight, never more");
    assert.equal(new Set(keys(sink.accepted())).size, 24);
    assert.equal(sink.accepted().length, 24, "nothing sent twice");
  });
});

test("the cursor never moves over a snapshot still in flight", async () => {
  await withRig({}, async (sink, rig) => {
    let release: () => void = () => {};
    const late = new Promise<void>((r) => (release = r));
    sink.decide = (r) => (r.body?.devices?.[0]?.metrics?.power_w === 0 ? { status: 200, wait: late } : undefined);
    for (let i = 0; i < 4; i++) rig.samples.append(snapshot(i));
    await sink.waitFor(() => sink.accepted().length === 3, 10000, "snapshots 1..3 while 0 is in flight");
    assert.equal(rig.samples.stats().push_cursor, 0, "the cursor waits for the oldest");
    assert.equal(rig.samples.stats().pending_snapshots, 4);
    release();
    await until(() => rig.samples.stats().pending_snapshots === 0, "the cursor over all four once 0 settled");
    assert.equal(sink.accepted().length, 4);
  });
});
