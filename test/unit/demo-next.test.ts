// The two commands `make run` suggests are the ones docs/dispatch.md shows, with the demo's values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { tryNext } from "../support/demo-next.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

const demo = (root: string, dir: string, apiPort = 8443) =>
  tryNext({ root, config: `${dir}/config.yaml`, caFile: `${dir}/tls/cert.pem`, apiPort, apiKey: "demo-api-key", site: "site-001" });

test("with the default folder and port, the demo's commands are docs/dispatch.md's worked example, line for line", () => {
  const doc = readFileSync(resolve(ROOT, "docs/dispatch.md"), "utf8").split("\n");
  const [heading, events, ...curl] = demo("/home/me/sitegate", "/home/me/sitegate/var/demo");
  assert.equal(heading, "try next, in another terminal in /home/me/sitegate, while this runs:");
  assert.equal(events, "  bin/sitegate events --config var/demo/config.yaml");
  assert.ok(
    doc.some((l) => l.startsWith(events.trim())),
    "the events line",
  );
  const at = doc.indexOf(curl[0]?.trim() ?? "");
  assert.ok(at > 0, "the curl's first line");
  assert.deepEqual(
    doc.slice(at, at + curl.length),
    curl.map((l) => l.slice(2)),
    "the curl, as the demo prints it (indented by two)",
  );
  for (const l of [heading, events, ...curl]) assert.ok(l.length <= 80, `fits 80 columns: ${l}`);
});

test("another port and a folder outside the clone are in the commands; a path with a space is quoted", () => {
  const lines = demo("/home/me/sitegate", "/tmp/my demo", 9443);
  assert.equal(lines[1], "  bin/sitegate events --config '/tmp/my demo/config.yaml'");
  assert.match(lines[2] ?? "", /^ {2}curl --cacert '\/tmp\/my demo\/tls\/cert\.pem' /);
  assert.match(lines.at(-1) ?? "", /https:\/\/127\.0\.0\.1:9443\/v1\/api\/gateway\/site-001\/dr$/);
});
