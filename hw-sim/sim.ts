// The simulator as a library: startSim(scenario) builds the site model and its devices,
// opens the Modbus TCP ports, the RTU pty pairs and the control API, and returns a
// handle that tests and the CLI use. `sitegate-sim` (cli.ts) is a thin wrapper.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { dirname, isAbsolute, resolve } from "node:path";
import { pino, type Logger } from "pino";
import { loadScenario, parseScenario, type DeviceSpec, type Scenario, type ScenarioInput } from "./scenario.js";
import { SiteModel } from "./site-model.js";
import { DeviceSlot, Endpoint, faultSchema, type FaultSpec } from "./faults.js";
import type { SimDevice } from "./models/device.js";
import { PvInverter, StorageInverter, SunSpecCommonOnly, SunSpecMeter, round1 } from "./models/sunspec-devices.js";
import { Sdm630 } from "./models/sdm630.js";
import { Relay } from "./models/relay.js";
import { buildBrandDevices } from "./models/brands/index.js";
import { UnknownDevice } from "./models/unknown.js";
import { TcpServer } from "./tcp-server.js";
import { RtuServer } from "./rtu-server.js";
import { ZigbeeBridge } from "./zigbee.js";
import { GpioChip, GpioError, type GpioEdge, type Level } from "./gpio.js";
import { splitHostPort, urlHost } from "../src/util/process.js";

export type { ScenarioInput, Scenario } from "./scenario.js";
export type { FaultSpec } from "./faults.js";
export type { SimDevice } from "./models/device.js";

export interface SimState {
  site: Record<string, unknown>;
  /** Modbus devices by name and Zigbee devices by friendly name. */
  devices: Record<string, Record<string, unknown>>;
  /** The zigbee2mqtt bridge, when the scenario has one. */
  zigbee?: Record<string, unknown>;
  /** GPIO lines by number, when the scenario has them. */
  gpio?: Record<string, Record<string, unknown>>;
}

export interface SimHandle {
  /** "http://127.0.0.1:PORT" */
  controlUrl: string;
  /** Bound port per `kind: tcp` or `kind: rtu-tcp` port, in scenario order. */
  tcpPorts: number[];
  /** Absolute path the gateway opens, per `kind: rtu` port, in scenario order. */
  rtuPeers: string[];
  scenario: Scenario;
  state(): SimState;
  setFault(f: FaultSpec): void;
  clearFaults(device?: string): void;
  device(name: string): SimDevice;
  site: SiteModel;
  /** The zigbee2mqtt bridge of the scenario's `zigbee` block. */
  zigbee?: ZigbeeBridge;
  /** The GPIO chip of the scenario's `gpio` block. */
  gpio?: GpioChip;
  stop(): Promise<void>;
}

/** A scenario device's models on the bus: one, or one per unit id for a device with several (a Victron GX). */
function buildDevices(spec: DeviceSpec, site: SiteModel): SimDevice[] {
  switch (spec.model) {
    case "sunspec-storage":
      return [new StorageInverter(spec, site)];
    case "sunspec-pv":
      return [new PvInverter(spec, site)];
    case "sunspec-meter":
      return [new SunSpecMeter(spec, site)];
    case "sunspec-common":
      return [new SunSpecCommonOnly(spec, site)];
    case "sdm630":
      return [new Sdm630(spec, site)];
    case "relay":
      return [new Relay(spec, site)];
    case "unknown":
      return [new UnknownDevice(spec, site.seed)];
    default:
      return buildBrandDevices(spec, site);
  }
}

export interface SimOptions {
  baseDir?: string;
  log?: Logger;
  /** The site clock (epoch ms), as a test injects it; absent: the scenario's start_time, else the machine's clock. */
  clock?: () => number;
  /** Each Modbus port's devices behind this endpoint instead of a plain one (a capture's failures first: replay-physics.ts). */
  endpoint?: () => Endpoint;
  /** Each Modbus device as the bus sees it (a capture laid under the model: replay-physics.ts). */
  device?: (dev: SimDevice) => SimDevice;
}

export async function startSim(scenario: ScenarioInput | string, opts: SimOptions = {}): Promise<SimHandle> {
  const sc = typeof scenario === "string" ? loadScenario(scenario) : parseScenario(scenario);
  const baseDir = opts.baseDir ?? (typeof scenario === "string" ? process.cwd() : process.cwd());
  const log = opts.log ?? pino({ level: "silent" });
  const site = new SiteModel(sc.site, sc.seed, opts.clock);
  const slots = new Map<string, { slot: DeviceSlot; port: string }>();
  const tcpServers: TcpServer[] = [];
  const rtuServers: RtuServer[] = [];
  const rtuPeers: string[] = [];
  let control: Server | null = null;
  let zigbee: ZigbeeBridge | undefined;
  const gpio = sc.gpio ? new GpioChip(sc.gpio.lines, site) : undefined;
  const streams = new Set<ServerResponse>();

  const stop = async () => {
    // Event streams never end by themselves: close them, or the server waits for them.
    for (const r of streams) r.destroy();
    streams.clear();
    await zigbee?.stop();
    if (control) {
      const c = control;
      const closed = new Promise<void>((r) => c.close(() => r()));
      c.closeAllConnections(); // kept-alive client connections would hold close() for seconds
      await closed;
    }
    control = null;
    await Promise.all([...tcpServers.map((s) => s.stop()), ...rtuServers.map((s) => s.stop())]);
    clearInterval(ticker);
  };

  // The site ticks even when nobody reads it: revert timers, SoC, energy counters.
  const ticker = setInterval(() => site.advance(), 250);
  ticker.unref();

  try {
    for (const p of sc.ports) {
      const endpoint = opts.endpoint?.() ?? new Endpoint();
      const label = p.kind === "rtu" ? `rtu ${p.peer}` : `${p.kind} ${p.listen}`;
      for (const d of p.devices) {
        for (const built of buildDevices(d, site)) {
          const dev = opts.device?.(built) ?? built;
          const slot = new DeviceSlot(dev);
          if (d.max_read_regs) slot.device.maxReadRegs = d.max_read_regs;
          endpoint.add(slot);
          slots.set(dev.name, { slot, port: label });
        }
      }
      if (p.kind === "tcp" || p.kind === "rtu-tcp") {
        const { host, port } = splitHostPort(p.listen);
        const srv = new TcpServer(endpoint, host, port, p.kind === "rtu-tcp" ? "rtu" : "mbap");
        tcpServers.push(srv);
        await srv.start();
        log.info({ port: srv.port, framing: p.kind, devices: p.devices.map((d) => `${d.unit}:${d.name}`) }, "modbus tcp listening");
      } else {
        const abs = (x: string) => (isAbsolute(x) ? x : resolve(baseDir, x));
        const srv = new RtuServer(endpoint, { ...p, path: abs(p.path), peer: abs(p.peer) });
        rtuServers.push(srv);
        await srv.start();
        rtuPeers.push(abs(p.peer));
        log.info(
          {
            peer: abs(p.peer),
            baud: p.baud,
            parity: p.parity,
            stop_bits: p.stop_bits,
            devices: p.devices.map((d) => `${d.unit}:${d.name}`),
          },
          "modbus rtu on pty",
        );
      }
    }
    if (sc.zigbee) {
      zigbee = new ZigbeeBridge(sc.zigbee, site, log, baseDir);
      await zigbee.start();
    }
    if (gpio) log.info({ lines: gpio.levels() }, "gpio chip ready");
  } catch (e) {
    await stop();
    throw e;
  }

  const getSlot = (name: string): DeviceSlot => {
    const s = slots.get(name);
    if (!s) throw new NotFound(`no device named "${name}"`);
    return s.slot;
  };

  const state = (): SimState => {
    site.advance();
    const devices: SimState["devices"] = {};
    for (const [name, { slot, port }] of slots) {
      devices[name] = {
        unit: slot.device.unit,
        model: slot.device.model,
        port,
        online: slot.online,
        ...slot.device.view(),
        faults: [...slot.faults.values()],
        requests: slot.requests,
        writes: slot.writes,
      };
    }
    if (zigbee) Object.assign(devices, zigbee.views());
    return {
      site: {
        time: new Date(site.clock()).toISOString(),
        ...(site.timezone === undefined ? {} : { timezone: site.timezone }),
        local_time: hhmm(site.localMinutes()),
        base_load_w: site.base_load_w,
        pv_irradiance: round1(site.irradiance() * 1000) / 1000,
        pv_irradiance_pinned: site.pv_irradiance !== undefined,
        grid_w: round1(site.grid()),
        import_wh: round1(site.importWh),
        export_wh: round1(site.exportWh),
      },
      devices,
      ...(zigbee ? { zigbee: zigbee.status() } : {}),
      ...(gpio ? { gpio: gpio.view() } : {}),
    };
  };

  const setFault = (f: FaultSpec) => {
    const spec = faultSchema.parse(f);
    if (zigbee?.has(spec.device)) {
      try {
        zigbee.setFault(spec.device, spec.fault, spec.delay_ms);
      } catch (e) {
        throw new BadRequest((e as Error).message);
      }
      log.info({ fault: spec }, "fault set");
      return;
    }
    getSlot(spec.device).setFault(spec);
    log.info({ fault: spec }, "fault set");
  };
  const clearFaults = (device?: string) => {
    if (device && zigbee?.has(device)) zigbee.clearFaults(device);
    else if (device) getSlot(device).faults.clear();
    else {
      for (const { slot } of slots.values()) slot.faults.clear();
      zigbee?.clearFaults();
    }
  };

  const { host, port } = splitHostPort(sc.control.listen);
  control = createServer((req, res) => {
    void handleControl(req, res, { state, setFault, clearFaults, getSlot, site, zigbee, gpio, streams }).catch((e) =>
      reply(res, 500, { error: String(e) }),
    );
  });
  const ctl = control;
  await new Promise<void>((res, rej) => {
    ctl.once("error", rej);
    ctl.listen(port, host, () => res());
  }).catch(async (e) => {
    await stop();
    throw e;
  });
  const addr = ctl.address();
  const controlUrl = `http://${urlHost(host)}:${typeof addr === "object" && addr ? addr.port : port}`;
  log.info({ url: controlUrl }, "control api listening");

  return {
    controlUrl,
    tcpPorts: tcpServers.map((s) => s.port),
    rtuPeers,
    scenario: sc,
    state,
    setFault,
    clearFaults,
    device: (name) => getSlot(name).device,
    site,
    ...(zigbee ? { zigbee } : {}),
    ...(gpio ? { gpio } : {}),
    stop,
  };
}

class NotFound extends Error {}

/** Minutes after midnight as "HH:MM". */
function hhmm(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, "0")}:${String(minutes % 60).padStart(2, "0")}`;
}

function reply(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let text = "";
  for await (const c of req) {
    text += c;
    if (text.length > 65536) throw new BadRequest("body too large");
  }
  try {
    return text ? JSON.parse(text) : {};
  } catch {
    throw new BadRequest("body is not JSON");
  }
}

class BadRequest extends Error {}

async function handleControl(
  req: IncomingMessage,
  res: ServerResponse,
  sim: {
    state: () => SimState;
    setFault: (f: FaultSpec) => void;
    clearFaults: (d?: string) => void;
    getSlot: (n: string) => DeviceSlot;
    site: SiteModel;
    zigbee: ZigbeeBridge | undefined;
    gpio: GpioChip | undefined;
    streams: Set<ServerResponse>;
  },
): Promise<void> {
  const url = new URL(req.url ?? "/", "http://x");
  const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (req.method === "GET" && url.pathname === "/state") return reply(res, 200, sim.state());
    if (parts[0] === "faults") {
      if (req.method === "POST" && parts.length === 1) {
        const r = faultSchema.safeParse(await readJson(req));
        if (!r.success) return reply(res, 400, { error: r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") });
        sim.setFault(r.data);
        return reply(res, 200, { ok: true, fault: r.data });
      }
      if (req.method === "DELETE" && parts.length <= 2) {
        sim.clearFaults(parts[1]);
        return reply(res, 200, { ok: true });
      }
    }
    if (req.method === "POST" && url.pathname === "/site") {
      const body = (await readJson(req)) as Record<string, unknown>;
      for (const [k, v] of Object.entries(body)) {
        if (k === "base_load_w" && typeof v === "number" && v >= 0) sim.site.base_load_w = v;
        else if (k === "load_noise_pct" && typeof v === "number" && v >= 0) sim.site.load_noise_pct = v;
        else if (k === "pv_irradiance" && (v === null || (typeof v === "number" && v >= 0 && v <= 1)))
          sim.site.pv_irradiance = v ?? undefined;
        else throw new BadRequest(`site.${k}: not settable or out of range`);
      }
      sim.site.advance();
      return reply(res, 200, sim.state().site);
    }
    if (parts[0] === "zigbee") return await zigbeeRoute(req, res, parts, sim);
    if (parts[0] === "gpio") return await gpioRoute(req, res, url, parts, sim);
    const device = parts[0] === "devices" && parts.length === 2 ? parts[1] : undefined;
    if (req.method === "POST" && device !== undefined && sim.zigbee?.has(device)) {
      const body = await readJson(req);
      if (!body || typeof body !== "object" || Array.isArray(body)) throw new BadRequest("body must be a JSON object");
      try {
        sim.zigbee.setByHand(device, body as Record<string, unknown>);
      } catch (e) {
        throw new BadRequest((e as Error).message);
      }
      return reply(res, 200, sim.state().devices[device]);
    }
    if (req.method === "POST" && device !== undefined) {
      const slot = sim.getSlot(device);
      try {
        slot.device.set((await readJson(req)) as Record<string, unknown>);
      } catch (e) {
        throw new BadRequest((e as Error).message);
      }
      return reply(res, 200, sim.state().devices[device]);
    }
    return reply(res, 404, { error: `no route ${req.method} ${url.pathname}` });
  } catch (e) {
    if (e instanceof NotFound) return reply(res, 404, { error: e.message });
    if (e instanceof BadRequest) return reply(res, 400, { error: e.message });
    throw e;
  }
}

type Sim = Parameters<typeof handleControl>[2];

/** POST /zigbee/bridge {"state": "online" | "offline"}; GET /zigbee: the bridge's status. */
async function zigbeeRoute(req: IncomingMessage, res: ServerResponse, parts: string[], sim: Sim): Promise<void> {
  if (!sim.zigbee) throw new NotFound("this scenario has no zigbee block");
  if (req.method === "GET" && parts.length === 1) return reply(res, 200, sim.zigbee.status());
  if (req.method === "POST" && parts.length === 2 && parts[1] === "bridge") {
    const body = (await readJson(req)) as Record<string, unknown> | null;
    const st = body && typeof body === "object" ? body.state : undefined;
    if (st !== "online" && st !== "offline") throw new BadRequest('state must be "online" or "offline"');
    const extra = Object.keys(body!).filter((k) => k !== "state");
    if (extra.length) throw new BadRequest(`unknown key ${extra.join(", ")}`);
    await sim.zigbee.setBridgeState(st);
    return reply(res, 200, sim.zigbee.status());
  }
  return reply(res, 404, { error: `no route ${req.method} /${parts.join("/")}` });
}

function lineNumber(s: string): number {
  if (!/^\d{1,4}$/.test(s)) throw new BadRequest(`"${s}" is not a gpio line number`);
  return Number(s);
}

async function levelBody(req: IncomingMessage, allowBounce: boolean): Promise<{ value: Level; bounce: number }> {
  const body = await readJson(req);
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new BadRequest("body must be a JSON object");
  const { value, bounce, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length) throw new BadRequest(`unknown key ${extra.join(", ")}`);
  if (value !== 0 && value !== 1) throw new BadRequest("value must be 0 or 1");
  if (bounce !== undefined && (!allowBounce || typeof bounce !== "number" || !Number.isInteger(bounce) || bounce < 0 || bounce > 20)) {
    throw new BadRequest(allowBounce ? "bounce must be an integer 0..20" : "bounce only applies to an input");
  }
  return { value, bounce: (bounce as number | undefined) ?? 0 };
}

/**
 * GET /gpio, GET /gpio/<line>, POST /gpio/<line> (inputs: the outside world),
 * POST /gpio/<line>/output (outputs: the gateway), GET /gpio/events (server-sent events).
 */
async function gpioRoute(req: IncomingMessage, res: ServerResponse, url: URL, parts: string[], sim: Sim): Promise<void> {
  const gpio = sim.gpio;
  if (!gpio) throw new NotFound("this scenario has no gpio block");
  try {
    if (req.method === "GET" && parts.length === 1) return reply(res, 200, { lines: gpio.levels() });
    if (req.method === "GET" && parts.length === 2 && parts[1] === "events") return gpioEvents(req, res, url, gpio, sim.streams);
    if (parts.length >= 2) {
      const n = lineNumber(parts[1] ?? "");
      if (req.method === "GET" && parts.length === 2) {
        const l = gpio.line(n);
        return reply(res, 200, { line: n, direction: l.spec.direction, value: l.value });
      }
      if (req.method === "POST" && parts.length === 2) {
        gpio.line(n);
        const { value, bounce } = await levelBody(req, true);
        return reply(res, 200, gpio.setInput(n, value, bounce));
      }
      if (req.method === "POST" && parts.length === 3 && parts[2] === "output") {
        gpio.line(n);
        const { value } = await levelBody(req, false);
        return reply(res, 200, gpio.driveOutput(n, value));
      }
    }
    return reply(res, 404, { error: `no route ${req.method} ${url.pathname}` });
  } catch (e) {
    if (e instanceof GpioError) return reply(res, e.status, { error: e.message });
    throw e;
  }
}

/** Server-sent events: a `snapshot` of every level first, then an `edge` per change; `?lines=17,27` filters. */
function gpioEvents(req: IncomingMessage, res: ServerResponse, url: URL, gpio: GpioChip, streams: Set<ServerResponse>): void {
  const filter = url.searchParams.get("lines");
  const only = filter ? new Set(filter.split(",").map((x) => lineNumber(x.trim()))) : null;
  if (only) for (const n of only) gpio.line(n);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const levels = Object.fromEntries(Object.entries(gpio.levels()).filter(([k]) => !only || only.has(Number(k))));
  res.write(`retry: 1000\nevent: snapshot\ndata: ${JSON.stringify({ seqno: gpio.seq, lines: levels })}\n\n`);
  const unwatch = gpio.watch((e: GpioEdge) => {
    if (!only || only.has(e.line)) res.write(`id: ${e.seqno}\nevent: edge\ndata: ${JSON.stringify(e)}\n\n`);
  });
  const keepalive = setInterval(() => res.write(": keepalive\n\n"), 15_000);
  keepalive.unref();
  streams.add(res);
  const done = () => {
    clearInterval(keepalive);
    unwatch();
    streams.delete(res);
  };
  req.once("close", done);
  res.once("close", done);
}

export const SIM_DIR = dirname(new URL(import.meta.url).pathname);
