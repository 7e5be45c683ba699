// The import graph of src/: no cycles, no module imports from a layer above its own, and
// no module imports a sibling layer (two layers of the same rank: neither may import the
// other, so a shared piece has to move down).
//
// Layers, lowest first (a file may import its own layer and any layer below; the most
// specific path wins, so modbus/device/ sits above profiles and devices while the rest of
// modbus/ sits below them):
//
//   base          errors.ts, version.ts, log.ts, lifecycle.ts, metrics.ts, event-bus.ts, util/
//   model         model/: the one device model (Device and its capability interfaces), roles,
//                 the shared vocabulary (capabilities, actions, event types)
//                 (no project imports but base)
//   modbus        modbus/: endpoints, transports, buses, planner, codecs, and the Modbus
//                 family's config block (its device entries, rtu_ports, their rules)
//   family-config zigbee/config-schema.ts, gpio/config-schema.ts: the Zigbee and GPIO
//                 families' config blocks (zod and util/ only; the rest of zigbee/ and
//                 gpio/ sits above config)
//   config        config/: the config file's schema, composing each family's block
//   storage       storage/: the database, migrations
//   update        update/: signed release bundles, install, rollback, the health marker (files only)
//   profiles      profiles/: profile schema and registry (formats issues with config/)
//   config-load   load-config.ts: reads a config file and checks its devices against the profiles
//   devices       devices/: the one registry of devices (directory, families), what every
//                 family shares, device contracts (the configure connector)
//   modbus-device modbus/device/: the Modbus family: profile-driven devices (driver, driver
//                 pool, pairing, polling, profile identification, control values, the spec
//                 edge of the partner's mb_* fields), its persisted registry, the config
//                 file's device entries applied at start
//   zigbee        zigbee/: Zigbee devices through a zigbee2mqtt bridge (its MQTT topics)
//   gpio          gpio/: GPIO lines (the chardev tools or the simulator's chip)
//   telemetry     telemetry/: the site clock (every family's readings at each tick, through
//                 the registry; no transport), sample store
//   delivery      delivery/: the durable log of outbound messages, lanes, the retry policy
//   uplink | dispatch   siblings: the HTTPS sink and the data push (uplink/); events on
//                 devices and telemetry (dispatch/), which hands its messages to the log
//                 through the composition root
//   ops           maintenance.ts, runtime-metrics.ts: housekeeping timers, process metrics
//   services      services/: what both front ends call (configure, device sync, events,
//                 the status of an error)
//   api | fleet   siblings: the two front ends, HTTPS (api/) and MQTT (fleet/)
//   ui            ui/: the status page (on the API's listener, with its credentials)
//   parts         parts/: the composition root's helpers (the bus's events, what joins two parts)
//   daemon        daemon.ts: the composition root
//   cli           cli.ts, cli/: the sitegate command
//
// Type-only imports and dynamic import() count: a cycle of types is still a cycle for a
// reader, and a lazy import is still a dependency.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join, posix, relative, resolve } from "node:path";

export const LAYERS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ["base", ["errors.ts", "node-guard.ts", "version.ts", "log.ts", "lifecycle.ts", "metrics.ts", "event-bus.ts", "util/"]],
  ["model", ["model/"]],
  ["modbus", ["modbus/"]],
  ["family-config", ["zigbee/config-schema.ts", "gpio/config-schema.ts"]],
  ["systemd", ["systemd/"]],
  ["config", ["config/"]],
  ["storage", ["storage/"]],
  ["health", ["health.ts"]],
  ["update", ["update/"]],
  ["profiles", ["profiles/"]],
  ["config-load", ["load-config.ts"]],
  ["devices", ["devices/"]],
  ["modbus-device", ["modbus/device/"]],
  ["zigbee", ["zigbee/"]],
  ["gpio", ["gpio/"]],
  ["telemetry", ["telemetry/"]],
  ["delivery", ["delivery/"]],
  ["uplink", ["uplink/"]],
  ["dispatch", ["dispatch/"]],
  ["ops", ["maintenance.ts", "runtime-metrics.ts", "control-socket.ts"]],
  ["services", ["services/"]],
  ["api", ["api/"]],
  ["fleet", ["fleet/"]],
  ["ui", ["ui/"]],
  ["parts", ["parts/"]],
  ["daemon", ["daemon.ts"]],
  ["cli", ["cli.ts", "cli/"]],
];

/** Layers of one rank (each a neighbour of the next in LAYERS): no import either way. */
export const SIBLINGS: ReadonlyArray<readonly string[]> = [
  ["uplink", "dispatch"],
  ["api", "fleet"],
];

/** A layer's rank: its place in LAYERS, or its first sibling's. */
function rankOf(layer: number): number {
  const group = SIBLINGS.find((g) => g.includes(LAYERS[layer][0]));
  return group ? Math.min(...group.map((name) => LAYERS.findIndex(([n]) => n === name))) : layer;
}

type Kind = "import" | "import type" | "import()";
interface Edge {
  from: string;
  to: string;
  kind: Kind;
}

/** Relative specifiers a TypeScript source imports or re-exports, with how. */
export function importsOf(source: string): Array<{ spec: string; kind: Kind }> {
  const out: Array<{ spec: string; kind: Kind }> = [];
  // Static import/export ... from "x": at a line start (so comment lines never match);
  // the clause may span lines but never crosses a quote or a semicolon.
  for (const m of source.matchAll(/^[ \t]*(import|export)(\s+type\b)?[^;'"`]*?\bfrom\s*(["'])([^"'\n]+)\3/gm)) {
    out.push({ spec: m[4], kind: m[2] ? "import type" : "import" });
  }
  for (const m of source.matchAll(/^[ \t]*import\s*(["'])([^"'\n]+)\1/gm)) out.push({ spec: m[2], kind: "import" });
  for (const m of source.matchAll(/\bimport\(\s*(["'])([^"'\n]+)\1\s*\)/g)) out.push({ spec: m[2], kind: "import()" });
  return out.filter((i) => i.spec.startsWith("."));
}

export function layerOf(file: string): number {
  let best = -1;
  let bestLen = -1;
  LAYERS.forEach(([, prefixes], i) => {
    for (const p of prefixes) {
      const hit = p.endsWith("/") ? file.startsWith(p) : file === p;
      if (hit && p.length > bestLen) {
        best = i;
        bestLen = p.length;
      }
    }
  });
  return best;
}

export interface Findings {
  unplaced: string[];
  unresolved: string[];
  upward: string[];
  lateral: string[];
  cycles: string[][];
}

/** Checks a set of files (path relative to src/ -> source text). */
export function analyze(files: ReadonlyMap<string, string>): Findings {
  const f: Findings = { unplaced: [], unresolved: [], upward: [], lateral: [], cycles: [] };
  const edges = new Map<string, Edge[]>();
  for (const [file, source] of files) {
    if (layerOf(file) < 0) f.unplaced.push(file);
    const list: Edge[] = [];
    for (const { spec, kind } of importsOf(source)) {
      const to = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, ".ts");
      if (!files.has(to)) {
        f.unresolved.push(`${file}: ${kind} "${spec}" is not a file in src/`);
        continue;
      }
      list.push({ from: file, to, kind });
    }
    edges.set(file, list);
  }
  for (const list of edges.values()) {
    for (const e of list) {
      const a = layerOf(e.from);
      const b = layerOf(e.to);
      if (a < 0 || b < 0 || a === b) continue;
      if (rankOf(b) > rankOf(a)) f.upward.push(`${e.from} (${LAYERS[a][0]}) -> ${e.to} (${LAYERS[b][0]}) by ${e.kind}: a layer above it`);
      else if (rankOf(b) === rankOf(a))
        f.lateral.push(`${e.from} (${LAYERS[a][0]}) -> ${e.to} (${LAYERS[b][0]}) by ${e.kind}: a sibling layer`);
    }
  }
  // Cycles: depth-first search; a back edge to a file on the current path closes one.
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const seen = new Set<string>();
  const visit = (file: string): void => {
    state.set(file, "open");
    path.push(file);
    for (const e of edges.get(file) ?? []) {
      const s = state.get(e.to);
      if (s === "open") {
        const cycle = [...path.slice(path.indexOf(e.to)), e.to];
        const key = [...cycle.slice(0, -1)].sort().join(" ");
        if (!seen.has(key)) {
          seen.add(key);
          f.cycles.push(cycle);
        }
      } else if (s === undefined) visit(e.to);
    }
    path.pop();
    state.set(file, "done");
  };
  for (const file of [...files.keys()].sort()) if (!state.has(file)) visit(file);
  return f;
}

/** A file's room: its top folder (`modbus/` holds modbus/device/ too), or the file itself at the top of src/. */
export function roomOf(file: string): string {
  const slash = file.indexOf("/");
  return slash < 0 ? file : file.slice(0, slash + 1);
}

/**
 * Circles between rooms (top folders): each a set of rooms every one of which reaches the
 * others through imports, with the imports that leave each room for another of the set.
 * Layers allow a folder to sit on both sides of another (modbus/device/ above profiles/,
 * the rest of modbus/ below it); a reader who opens the folders sees a circle all the same.
 */
export function roomCircles(files: ReadonlyMap<string, string>): string[][] {
  const edges = new Map<string, Map<string, string[]>>();
  for (const [file, source] of files)
    for (const { spec, kind } of importsOf(source)) {
      const to = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, ".ts");
      const [a, b] = [roomOf(file), roomOf(to)];
      if (a === b) continue;
      const out = edges.get(a) ?? new Map<string, string[]>();
      edges.set(a, out);
      out.set(b, [...(out.get(b) ?? []), `${file} -> ${to} by ${kind}`]);
    }
  // Tarjan's strongly connected components over the rooms.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const circles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      set.push(w);
    } while (w !== v);
    if (set.length > 1) circles.push(set.sort().flatMap((a) => set.filter((b) => b !== a).flatMap((b) => edges.get(a)?.get(b) ?? [])));
  };
  for (const room of [...edges.keys()].sort()) if (!index.has(room)) visit(room);
  return circles;
}

function srcFiles(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const ent of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, ent.name);
      if (ent.isDirectory()) walk(p);
      else if (ent.name.endsWith(".ts") && !ent.name.endsWith(".d.ts"))
        out.set(relative(root, p).split("\\").join("/"), readFileSync(p, "utf8"));
    }
  };
  walk(root);
  return out;
}

const SRC = resolve(fileURLToPath(import.meta.url), "../../../../src");
const HW_SIM = resolve(fileURLToPath(import.meta.url), "../../../../hw-sim");

test("src/: every file has a layer, every import resolves, no upward or lateral import, no cycle", () => {
  const files = srcFiles(SRC);
  assert.ok(files.size > 40 && files.has("daemon.ts"), `read ${files.size} files from ${SRC}`);
  const f = analyze(files);
  assert.deepEqual(f.unplaced, [], "files in no layer: add them to LAYERS at the top of this test");
  assert.deepEqual(f.unresolved, []);
  assert.deepEqual(f.upward, [], "move the shared piece down a layer, or build the composition one layer up");
  assert.deepEqual(f.lateral, [], "move the shared piece down below both siblings");
  assert.deepEqual(
    f.cycles.map((c) => c.join(" -> ")),
    [],
  );
});

test("hw-sim/: no import cycle between its files (a type-only import counts: a reader follows it all the same)", () => {
  const files = new Map([...srcFiles(HW_SIM)].filter(([f]) => !f.startsWith("dist/") && !f.startsWith("node_modules/")));
  assert.ok(files.has("sim.ts") && files.has("models/brands/index.ts"), `read ${files.size} files from ${HW_SIM}`);
  assert.deepEqual(
    analyze(files).cycles.map((c) => c.join(" -> ")),
    [],
  );
});

test("src/: no circle between folders (rooms), whatever the layers of the files in them", () => {
  const files = srcFiles(SRC);
  assert.deepEqual(roomCircles(files), [], "a folder that imports a folder that imports it back: move the piece into one of them");
});

/** Direct imports of `from` files (under any of the prefixes) into files under any of `to`. */
function importsInto(files: ReadonlyMap<string, string>, from: readonly string[], to: readonly string[]): string[] {
  const out: string[] = [];
  for (const [file, source] of files) {
    if (!from.some((p) => file.startsWith(p))) continue;
    for (const { spec, kind } of importsOf(source)) {
      const target = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, ".ts");
      if (to.some((p) => target.startsWith(p))) out.push(`${file} -> ${target} by ${kind}`);
    }
  }
  return out;
}

const TRANSPORTS = ["modbus/", "zigbee/", "gpio/"];

test("no module in src/dispatch imports a transport (modbus/, zigbee/, gpio/) or a device family's internals: it drives Device capabilities", () => {
  const files = srcFiles(SRC);
  assert.deepEqual(importsInto(files, ["dispatch/"], [...TRANSPORTS, "devices/local.ts", "devices/directory.ts"]), []);
});

test("no module in src/ui, src/services, src/fleet or src/api imports a transport (modbus/, zigbee/, gpio/) or a device family's internals: they read the DeviceDirectory", () => {
  const files = srcFiles(SRC);
  const internals = ["devices/local.ts"];
  assert.deepEqual(importsInto(files, ["ui/", "services/", "fleet/", "api/"], [...TRANSPORTS, ...internals]), []);
});

test("the site clock (src/telemetry) imports no transport: it asks every family for its readings through the registry", () => {
  const files = srcFiles(SRC);
  assert.deepEqual(importsInto(files, ["telemetry/"], TRANSPORTS), []);
});

/**
 * The partner's mb_* fields belong to the Modbus family: only src/modbus/ speaks them. The
 * config file's Modbus block (its device entries, rtu_ports) is the family's
 * (modbus/config-schema.ts), which config/schema.ts composes; the services reach a
 * configure entry through the family's connector.
 */
test("mb_ appears only under the Modbus family's folder (src/modbus/)", () => {
  const files = srcFiles(SRC);
  const speaking = [...files].filter(([f, source]) => !f.startsWith("modbus/") && /\bmb_[a-z]/.test(source)).map(([f]) => f);
  assert.deepEqual(speaking, [], "read the mb_* fields in the Modbus family (modbus/), not here");
});

/**
 * Each family owns its config block (modbus/, zigbee/, gpio/ config-schema.ts), which
 * config/schema.ts composes: the family's folder never imports config/ back, and its block
 * takes nothing of the project but util/ (so it sits below config/).
 */
test("a family's config block is in its folder: no module under modbus/, zigbee/ or gpio/ imports config/, and a block imports only util/", () => {
  const files = srcFiles(SRC);
  assert.deepEqual(importsInto(files, TRANSPORTS, ["config/"]), [], "a family's config lives in its own folder (config-schema.ts)");
  const blocks = new Map([...files].filter(([f]) => ["zigbee/config-schema.ts", "gpio/config-schema.ts"].includes(f)));
  assert.equal(blocks.size, 2, "the Zigbee and GPIO blocks are zigbee/config-schema.ts and gpio/config-schema.ts");
  const leaving = [...blocks].flatMap(([f, source]) =>
    importsOf(source)
      .map(({ spec }) => posix.normalize(posix.join(posix.dirname(f), spec)))
      .filter((to) => !to.startsWith("util/"))
      .map((to) => `${f} -> ${to}`),
  );
  assert.deepEqual(leaving, [], "a family's config block imports only zod and util/");
});

test("the site's events are typed without a transport", () => {
  const files = srcFiles(SRC);
  assert.deepEqual(importsInto(new Map([...files].filter(([f]) => f === "parts/site-events.ts")), ["parts/"], TRANSPORTS), []);
});

test("the checker finds what it should: import forms, upward and lateral imports, cycles, unplaced files", () => {
  const found = importsOf(
    [
      `// import { no } from "./commented.js";`,
      ` * import { neither } from "./doc-comment.js";`,
      `import {`,
      `  a,`,
      `  type B,`,
      `} from "./multi-line.js";`,
      `import type { C } from '../single-quoted.js';`,
      `export { d } from "./re-export.js";`,
      `export type { E } from "./re-export-type.js";`,
      `import "./side-effect.js";`,
      `import { readFileSync } from "node:fs";`,
      `const x = Array.from("abc"); const lazy = () => import("./lazy.js");`,
    ].join("\n"),
  );
  assert.deepEqual(found, [
    { spec: "./multi-line.js", kind: "import" },
    { spec: "../single-quoted.js", kind: "import type" },
    { spec: "./re-export.js", kind: "import" },
    { spec: "./re-export-type.js", kind: "import type" },
    { spec: "./side-effect.js", kind: "import" },
    { spec: "./lazy.js", kind: "import()" },
  ]);

  const f = analyze(
    new Map([
      ["modbus/part.ts", `import { DriverPool } from "../devices/pool.js";`],
      ["devices/pool.ts", `import { Bus } from "../modbus/bus.js";`],
      ["modbus/bus.ts", ``],
      ["api/server.ts", `import { routes } from "./gateway.js";`],
      ["api/gateway.ts", `import type { ApiContext } from "./server.js";`],
      ["cli.ts", `const run = () => import("./cli/run.js");`],
      ["cli/run.ts", `import type { Command } from "../cli.js";\nimport { gone } from "./gone.js";`],
      ["somewhere/new.ts", ``],
      ["fleet/commands.ts", `import { fromSitegateError } from "../api/errors.js";`],
      ["api/errors.ts", `import { errorAnswer } from "../services/errors.js";`],
      ["services/errors.ts", ``],
    ]),
  );
  assert.deepEqual(f.upward, ["modbus/part.ts (modbus) -> devices/pool.ts (devices) by import: a layer above it"]);
  assert.deepEqual(f.lateral, ["fleet/commands.ts (fleet) -> api/errors.ts (api) by import: a sibling layer"]);
  assert.deepEqual(f.cycles.map((c) => c.join(" -> ")).sort(), [
    "api/gateway.ts -> api/server.ts -> api/gateway.ts",
    "cli.ts -> cli/run.ts -> cli.ts",
  ]);
  assert.deepEqual(f.unplaced, ["somewhere/new.ts"]);
  assert.deepEqual(f.unresolved, ['cli/run.ts: import "./gone.js" is not a file in src/']);
  assert.equal(LAYERS[layerOf("modbus/device/driver.ts")][0], "modbus-device", "the most specific prefix wins");
  assert.equal(LAYERS[layerOf("modbus/bus.ts")][0], "modbus");
  // A circle of folders the layers allow (modbus/device/ above profiles/, modbus/ below it).
  const rooms = roomCircles(
    new Map([
      ["modbus/device/driver.ts", `import type { Profile } from "../../profiles/schema.js";`],
      ["profiles/schema.ts", `import { Bus } from "../modbus/bus.js";`],
      ["modbus/bus.ts", `import { x } from "../util/x.js";`],
      ["util/x.ts", ``],
    ]),
  );
  assert.deepEqual(rooms, [
    ["modbus/device/driver.ts -> profiles/schema.ts by import type", "profiles/schema.ts -> modbus/bus.ts by import"],
  ]);
});
