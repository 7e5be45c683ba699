// The front ends (the status page, the services both APIs call, the fleet, the partner
// API) ask devices through the one device model and the commissioning interface: none of
// them imports a transport (modbus/, zigbee/, gpio/) or a device family's internals. The
// site's event payloads are typed below the transports too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join, posix, relative, resolve } from "node:path";
import { importsOf } from "./import-graph.test.js";

const SRC = resolve(fileURLToPath(import.meta.url), "../../../../src");
const FRONT_ENDS = ["ui/", "services/", "fleet/", "api/"];
const FORBIDDEN = ["modbus/", "zigbee/", "gpio/", "devices/local.ts", "devices/driver.ts", "devices/pool.ts", "devices/commission.ts"];

function filesUnder(dir: string): string[] {
  return readdirSync(join(SRC, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(SRC, join(e.parentPath, e.name)).split("\\").join("/"));
}

/** Each forbidden import of `files`, as "from -> to". */
function forbiddenImports(files: string[], forbidden: string[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    for (const { spec } of importsOf(readFileSync(join(SRC, file), "utf8"))) {
      const to = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, ".ts");
      if (forbidden.some((f) => (f.endsWith("/") ? to.startsWith(f) : to === f))) out.push(`${file} -> ${to}`);
    }
  }
  return out;
}

test("no front end imports a transport or a device family's internals", () => {
  const files = FRONT_ENDS.flatMap(filesUnder);
  assert.ok(files.length > 20, `read ${files.length} files`);
  assert.deepEqual(forbiddenImports(files, FORBIDDEN), []);
});

test("the site's events are typed without a transport", () => {
  assert.deepEqual(forbiddenImports(["parts/site-events.ts"], ["modbus/", "zigbee/", "gpio/"]), []);
});
