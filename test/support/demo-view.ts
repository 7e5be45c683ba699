// What `make run` prints, as pure functions of what it has seen: kW with three significant
// digits, codes with their names, devices in device_id order, a compact table under a
// header that always carries the addresses.

/** device_op_mode of device sync (partner interface 2.2). */
export const OP_MODES: Record<number, string> = {
  0: "unknown",
  1: "local automatic",
  2: "remote dispatch",
  3: "standby",
  4: "fault",
};

/** SunSpec inverter operating state St (models 101-113). */
export const SUNSPEC_ST: Record<number, string> = {
  1: "off",
  2: "sleeping",
  3: "starting",
  4: "producing (MPPT)",
  5: "throttled",
  6: "shutting down",
  7: "fault",
  8: "standby",
};

/** Watts as kilowatts with three significant digits ("3.00 kW", "-0.512 kW", "12.3 kW"). */
export function kw(w: number | undefined): string {
  if (w === undefined || !Number.isFinite(w)) return "–";
  const k = w / 1000;
  if (Math.abs(w) < 0.5) return "0.00 kW";
  return `${Math.abs(k) >= 100 ? k.toFixed(0) : k.toPrecision(3)} kW`;
}

export function opModeName(code: number | undefined): string {
  if (code === undefined) return "–";
  return `${OP_MODES[code] ?? `code ${code}`}`;
}

export function sunspecStateName(st: number | undefined): string {
  if (st === undefined) return "–";
  return SUNSPEC_ST[st] ?? `St ${st}`;
}

/** The relay's `state` metric: a coil bit mask, coil 1 = bit 0. */
export function coilsText(mask: number | undefined, coils: number): string {
  if (mask === undefined) return "–";
  return Array.from({ length: coils }, (_, i) => `${i + 1}:${(mask >> i) & 1 ? "on" : "off"}`).join(" ");
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
export function deviceRows(devices: Iterable<DemoDevice>, relayCoils = 4): string[][] {
  const sorted = [...devices].sort((a, b) => (a.device_id < b.device_id ? -1 : a.device_id > b.device_id ? 1 : 0));
  return sorted.map((d) => {
    const m = d.metrics ?? {};
    let state = "–";
    let more = "";
    if (d.profile === "relay-coils") state = `coils ${coilsText(m.state, relayCoils)}`;
    else if (d.profile === "sunspec" && m.state !== undefined) state = sunspecStateName(m.state);
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

export function header(a: Addresses): string[] {
  return [
    "sitegate demo   (Ctrl-C stops everything)",
    `  gateway API   ${a.api}   user partner / ${a.password}, X-API-Key: ${a.apiKey}`,
    `  status page   ${a.statusPage}`,
    `  partner sink  ${a.sink}`,
    `  simulator     ${a.simControl}/state`,
    `  config        ${a.config}`,
    "  SD card       telemetry.commit_interval_s 30 (the default): a power cut loses at most 30 s of samples (docs/sd-card.md)",
  ];
}

/** Grid power as a person says it: "1.26 kW import" / "0.512 kW export". */
export function gridText(w: number): string {
  return `${kw(Math.abs(w))} ${w >= 0 ? "import" : "export"}`;
}

/**
 * The whole screen of a terminal: header, table, the latest story lines (newest last), each
 * line cut to the width so that none wraps and the redraw keeps its place.
 */
export function screen(a: Addresses, devices: Iterable<DemoDevice>, story: string[], rows: number, cols = 200): string {
  const top = [...header(a), "", ...table(deviceRows(devices)), ""];
  const room = Math.max(3, rows - top.length - 1);
  return [...top, ...story.slice(-room)].map((l) => (l.length > cols ? l.slice(0, cols - 1) + "…" : l)).join("\n");
}
