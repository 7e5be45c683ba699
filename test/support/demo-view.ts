// What `make run` prints, as pure functions of what it has seen: kW with three significant
// digits, codes with their names, devices in device_id order, a compact table under a
// header that always carries the addresses. States and op modes are named by the same
// tables as the status page's (src/profiles/value-names.ts, src/model/roles.ts).
import { opModeWords } from "../../src/model/roles.js";
import { TELEMETRY_COMMIT_S } from "../../src/config/schema.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { valueName } from "../../src/profiles/value-names.js";

/** Watts as kilowatts with three significant digits ("3.00 kW", "-0.512 kW", "12.3 kW"). */
export function kw(w: number | undefined): string {
  if (w === undefined || !Number.isFinite(w)) return "–";
  const k = w / 1000;
  if (Math.abs(w) < 0.5) return "0.00 kW";
  return `${Math.abs(k) >= 100 ? k.toFixed(0) : k.toPrecision(3)} kW`;
}

/** device_op_mode in words, as the status page names it (one table: model/roles.ts). */
export function opModeName(code: number | undefined): string {
  return code === undefined ? "–" : opModeWords(code);
}

/** A device's `state` reading in words, by its profile (one table for the terminal and the page: profiles/value-names.ts). */
export function stateName(profile: string, state: number | undefined): string {
  if (state === undefined || !builtinProfiles().has(profile)) return "–";
  return valueName(builtinProfiles().get(profile), "state", state) ?? `state ${state}`;
}

export interface DemoDevice {
  device_id: string;
  /** The profile's name (device_integration after the slash). */
  profile: string;
  /** Manufacturer, model, serial as pairing read them; empty before pairing. */
  identity: string;
  op_mode?: number;
  metrics?: Record<string, number>;
}

/** One row per device: id, power, state in words, op mode, the rest that matters for the story. */
export function deviceRows(devices: Iterable<DemoDevice>): string[][] {
  const sorted = [...devices].sort((a, b) => (a.device_id < b.device_id ? -1 : a.device_id > b.device_id ? 1 : 0));
  return sorted.map((d) => {
    const m = d.metrics ?? {};
    const state = stateName(d.profile, m.state);
    let more = "";
    if (m.soc_pct !== undefined) more = `SoC ${m.soc_pct.toFixed(1)} %`;
    if (m.energy_import_wh !== undefined) more = `imported ${(m.energy_import_wh / 1000).toFixed(2)} kWh`;
    const meter = d.profile !== "relay-coils" && m.power_w !== undefined && /grid|sdm|meter/.test(d.device_id);
    const power = meter ? gridText(m.power_w) : kw(m.power_w);
    return [d.device_id, power, state, opModeName(d.op_mode), more, d.identity || "(not paired yet)"];
  });
}

const HEAD = ["device", "power", "state", "op mode", "", "identity"];

/** Columns padded to their widest cell, two spaces apart. */
export function table(rows: string[][], head = HEAD): string[] {
  const all = [head, ...rows];
  const widths = head.map((_, c) => Math.max(...all.map((r) => (r[c] ?? "").length)));
  return all.map((r) =>
    r
      .map((c, i) => (c ?? "").padEnd(widths[i]))
      .join("  ")
      .trimEnd(),
  );
}

export interface Addresses {
  api: string;
  statusPage: string;
  sink: string;
  simControl: string;
  config: string;
  password: string;
  apiKey: string;
}

/** The addresses, one to a line, each short enough for an 80-column terminal (the API key on a line of its own). */
export function header(a: Addresses): string[] {
  return [
    "sitegate demo   (Ctrl-C stops everything)",
    `  gateway API   ${a.api}   user partner / ${a.password}`,
    `  X-API-Key     ${a.apiKey}`,
    `  status page   ${a.statusPage}`,
    `  partner sink  ${a.sink}`,
    `  simulator     ${a.simControl}/state`,
    `  config        ${a.config}`,
    `  SD card       a power cut loses at most ${TELEMETRY_COMMIT_S} s of samples (docs/sd-card.md)`,
  ];
}

/** Grid power as a person says it: "1.26 kW import" / "0.512 kW export". */
export function gridText(w: number): string {
  return `${kw(Math.abs(w))} ${w >= 0 ? "import" : "export"}`;
}

/**
 * The device table at most `cols` wide: the identity column goes first when it does not
 * fit, then the column of extras (SoC, energy); id, power, state and op mode always stay.
 */
export function fittedTable(rows: string[][], cols: number): string[] {
  for (const keep of [6, 5, 4]) {
    const lines = table(
      rows.map((r) => r.slice(0, keep)),
      HEAD.slice(0, keep),
    );
    if (keep === 4 || Math.max(...lines.map((l) => l.length)) <= cols) return lines;
  }
  return [];
}

/**
 * The whole screen of a terminal: header, table, the latest story lines (newest last), each
 * line cut to the width so that none wraps and the redraw keeps its place. The header and
 * the table come whole on an 80x24 terminal; the story gets the rows left (at least three).
 */
export function screen(a: Addresses, devices: Iterable<DemoDevice>, story: string[], rows: number, cols = 200): string {
  const top = [...header(a), "", ...fittedTable(deviceRows(devices), cols), ""];
  const room = Math.max(3, rows - top.length - 1);
  return [...top, ...story.slice(-room)].map((l) => (l.length > cols ? l.slice(0, cols - 1) + "…" : l)).join("\n");
}
