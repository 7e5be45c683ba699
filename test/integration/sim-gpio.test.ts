// The simulated GPIO chip over the control API: inputs set from outside (a test, a
// technician), outputs driven by the gateway, edge events as server-sent events, and an
// output's load in the site balance the grid meter reads.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput, type SimHandle, control } from "../support/site.js";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadScenario, parseScenario } from "../../hw-sim/scenario.js";

const REPO = resolve(fileURLToPath(import.meta.url), "../../../..");

function scenario(): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 3, model: "sunspec-meter", name: "grid" }] }],
    gpio: {
      lines: [
        { line: 17, direction: "input", name: "rse" },
        { line: 22, direction: "input", value: 1 },
        { line: 27, direction: "output", load_w: 3000, value: 1, name: "boiler" },
      ],
    },
  };
}

const grid = (site: SimHandle) => site.state().devices.grid.power_w as number;

interface SseEvent {
  event: string;
  id?: string;
  data: any;
}

/** A reader of GET /gpio/events: next() resolves with each event in order. */
async function events(
  site: SimHandle,
  query = "",
): Promise<{ next: () => Promise<SseEvent>; close: () => void; contentType: string | null }> {
  const ac = new AbortController();
  const res = await fetch(`${site.controlUrl}/gpio/events${query}`, { signal: ac.signal });
  assert.equal(res.status, 200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  const queue: SseEvent[] = [];
  const next = async (): Promise<SseEvent> => {
    for (;;) {
      if (queue.length) return queue.shift()!;
      const { value, done } = await reader.read();
      if (done) throw new Error("event stream ended");
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const ev: Partial<SseEvent> & { data?: any } = {};
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) ev.event = line.slice(7);
          else if (line.startsWith("id: ")) ev.id = line.slice(4);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (ev.event) queue.push({ event: ev.event, id: ev.id, data: JSON.parse(data) });
      }
    }
  };
  return { next, close: () => ac.abort(), contentType: res.headers.get("content-type") };
}

test("an input set through the control API shows in /gpio, /gpio/<line>, /state and as an edge event", async () => {
  await withSite(scenario(), async (site) => {
    assert.deepEqual((await control(site, "GET", "/gpio")).json, { lines: { "17": 0, "22": 1, "27": 1 } });
    const stream = await events(site);
    try {
      assert.match(stream.contentType ?? "", /^text\/event-stream/);
      const snap = await stream.next();
      assert.equal(snap.event, "snapshot");
      assert.deepEqual(snap.data, { seqno: 0, lines: { "17": 0, "22": 1, "27": 1 } });

      const r = await control(site, "POST", "/gpio/17", { value: 1 });
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, { line: 17, value: 1, changed: true });
      const edge = await stream.next();
      assert.equal(edge.event, "edge");
      assert.equal(edge.id, "1");
      assert.deepEqual(
        { ...edge.data, timestamp_ns: undefined },
        { seqno: 1, line_seqno: 1, line: 17, direction: "input", edge: "rising", value: 1, timestamp_ns: undefined },
      );
      assert.match(edge.data.timestamp_ns, /^\d{19}$/);

      assert.deepEqual((await control(site, "GET", "/gpio")).json.lines, { "17": 1, "22": 1, "27": 1 });
      assert.deepEqual((await control(site, "GET", "/gpio/17")).json, { line: 17, direction: "input", value: 1 });
      assert.deepEqual(site.state().gpio?.["17"], { direction: "input", value: 1, edges: 1, name: "rse" });

      // The same level again is no edge; a bouncing contact is several, ending at the level set.
      assert.equal((await control(site, "POST", "/gpio/17", { value: 1 })).json.changed, false);
      await control(site, "POST", "/gpio/22", { value: 0, bounce: 2 });
      const seen: Array<[number, string]> = [];
      for (let i = 0; i < 5; i++) {
        const e = await stream.next();
        seen.push([e.data.line, e.data.edge]);
      }
      assert.deepEqual(seen, [
        [22, "falling"],
        [22, "rising"],
        [22, "falling"],
        [22, "rising"],
        [22, "falling"],
      ]);
      assert.equal((await control(site, "GET", "/gpio/22")).json.value, 0);
    } finally {
      stream.close();
    }
  });
});

test("an output's load counts in the balance; the gateway drives it with /output, setting it from outside is refused", async () => {
  await withSite(scenario(), async (site) => {
    const on = grid(site);
    assert.ok(Math.abs(on - 5000) < 1, `base 2000 + boiler 3000, got ${on}`);
    assert.deepEqual(site.state().gpio?.["27"], { direction: "output", value: 1, edges: 0, name: "boiler", load_w: 3000, power_w: 3000 });

    const refused = await control(site, "POST", "/gpio/27", { value: 0 });
    assert.equal(refused.status, 400);
    assert.match(refused.json.error, /line 27 is an output.*POST \/gpio\/27\/output/);
    const notOutput = await control(site, "POST", "/gpio/17/output", { value: 1 });
    assert.equal(notOutput.status, 400);
    assert.match(notOutput.json.error, /line 17 is an input/);
    assert.equal(grid(site), on, "nothing changed");

    const stream = await events(site, "?lines=27");
    try {
      assert.deepEqual((await stream.next()).data.lines, { "27": 1 });
      await control(site, "POST", "/gpio/17", { value: 1 }); // filtered out of this stream
      const r = await control(site, "POST", "/gpio/27/output", { value: 0 });
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, { line: 27, value: 0, changed: true });
      const e = await stream.next();
      assert.deepEqual([e.data.line, e.data.direction, e.data.edge], [27, "output", "falling"]);
    } finally {
      stream.close();
    }
    assert.ok(Math.abs(on - grid(site) - 3000) < 1, `the boiler's 3000 W off: ${on} -> ${grid(site)}`);
    assert.equal(site.state().gpio?.["27"].power_w, 0);
    await control(site, "POST", "/gpio/27/output", { value: 1 });
    assert.ok(Math.abs(grid(site) - on) < 1);
  });
});

test("bad gpio requests get a clear status and reason", async () => {
  await withSite(scenario(), async (site) => {
    const cases: Array<[string, string, unknown, number, RegExp]> = [
      ["POST", "/gpio/5", { value: 1 }, 404, /no gpio line 5 \(lines: 17, 22, 27\)/],
      ["POST", "/gpio/17", { value: 2 }, 400, /value must be 0 or 1/],
      ["POST", "/gpio/17", { value: true }, 400, /value must be 0 or 1/],
      ["POST", "/gpio/17", { value: 1, level: 1 }, 400, /unknown key level/],
      ["POST", "/gpio/17", { value: 1, bounce: 99 }, 400, /bounce must be an integer 0\.\.20/],
      ["POST", "/gpio/27/output", { value: 1, bounce: 1 }, 400, /bounce only applies to an input/],
      ["POST", "/gpio/abc", { value: 1 }, 400, /"abc" is not a gpio line number/],
      ["GET", "/gpio/events?lines=99", undefined, 404, /no gpio line 99/],
    ];
    for (const [method, path, body, status, re] of cases) {
      const r = await control(site, method, path, body);
      assert.equal(r.status, status, `${method} ${path}`);
      assert.match(r.json.error, re, `${method} ${path}`);
    }
    assert.deepEqual((await control(site, "GET", "/gpio")).json.lines, { "17": 0, "22": 1, "27": 1 }, "nothing changed");
  });
});

test("a scenario without gpio answers 404 on /gpio; bad gpio blocks are refused with the path and the reason", async () => {
  const s = scenario();
  await withSite({ ...s, gpio: undefined }, async (site) => {
    const r = await control(site, "GET", "/gpio");
    assert.equal(r.status, 404);
    assert.match(r.json.error, /no gpio block/);
    assert.equal(site.state().gpio, undefined);
  });
  const err = (lines: unknown[]) => {
    try {
      parseScenario({ ...s, gpio: { lines } });
    } catch (e) {
      return (e as Error).message;
    }
    return "accepted";
  };
  assert.match(err([{ line: 17, direction: "input", load_w: 100 }]), /gpio\.lines\[0\]\.load_w: load_w only applies to an output line/);
  assert.match(
    err([
      { line: 17, direction: "input" },
      { line: 17, direction: "output" },
    ]),
    /gpio\.lines\[1\]\.line: line 17 is declared twice/,
  );
  assert.match(err([{ line: 17, direction: "sideways" }]), /gpio\.lines\[0\]\.direction: must be "input" or "output"/);
  assert.match(err([{ line: 17, direction: "output", value: 2 }]), /gpio\.lines\[0\]\.value: must be 0 or 1/);
  assert.match(err([]), /gpio\.lines/);
});

test("the demo scenario hw-sim/scenarios/zigbee-gpio-site.yaml is valid", () => {
  const sc = loadScenario(join(REPO, "hw-sim/scenarios/zigbee-gpio-site.yaml"));
  assert.deepEqual(
    sc.gpio?.lines.map((l) => [l.line, l.direction]),
    [
      [17, "input"],
      [27, "output"],
    ],
  );
  assert.deepEqual(
    sc.zigbee?.devices.map((d) => d.kind),
    ["plug", "plug", "thermostat"],
  );
});
