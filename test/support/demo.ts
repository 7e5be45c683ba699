// `make run`: the whole bench on one laptop, telling the dispatch story. Starts the
// simulator with the demo site and a local HTTPS partner sink (both in this process), and
// the gateway (a child, as installed) configured for the demo devices. Once the devices
// are paired and the first data push has reached the sink, it sends a discharge, a shed and
// a restore through the partner API (/dr with the demo's API key) and shows each receipt,
// the devices moving and the execution response arriving at the sink. Then telemetry runs
// on until Ctrl-C. On a terminal the screen is redrawn in place; otherwise the story is
// printed line by line with the device table every 10 s.
//   SITEGATE_DEMO_PORT / _SINK_PORT / _SIM_PORT / _MODBUS_PORT  the four ports (demo-ports.ts)
//   SITEGATE_DEMO_DIR        where the config, the database and the pty pair live (var/demo)
//   SITEGATE_DEMO_LONGITUDE  where the simulated sun stands (default: the meridian of the machine's time zone)
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join, resolve } from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";
import { hashSecret } from "../../src/util/secret-hash.js";
import { STOP_EXIT_MS } from "../../src/lifecycle.js";
import type { SimState } from "../../hw-sim/sim.js";
import { certIn } from "./tls.js";
import { tryNext } from "./demo-next.js";
import { PartnerSink } from "./partner-sink.js";
import { demoPorts, portsInUse, type DemoPort, type PortKey } from "./demo-ports.js";
import { deviceRows, gridText, header, kw, screen, table, type Addresses, type DemoDevice } from "./demo-view.js";

const root = resolve(fileURLToPath(import.meta.url), "../../../..");
const dist = join(root, "dist");

const PASSWORD = "partner";
const API_KEY = "demo-api-key";
const ORG = "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f";
const SITE = "site-001";
/** How long the demo waits for the devices and the first push before it calls the start failed. */
const START_BOUND_MS = 120_000;

type Ports = Record<PortKey, DemoPort>;

/** Everything the screen shows, updated by the sink, the gateway's log and the device sync. */
class Board {
  readonly devices = new Map<string, DemoDevice>();
  readonly story: string[] = [];
  private readonly tty = process.stdout.isTTY === true;
  private timer: NodeJS.Timeout | null = null;

  constructor(readonly addr: Addresses) {}

  say(text: string): void {
    this.add(`${new Date().toTimeString().slice(0, 8)}  ${text}`);
  }

  /** Lines without a time in front: commands to copy as they are. */
  block(lines: string[]): void {
    for (const l of lines) this.add(l);
  }

  private add(line: string): void {
    this.story.push(line);
    if (this.story.length > 200) this.story.shift();
    if (!this.tty) process.stdout.write(line + "\n");
  }

  start(): void {
    if (this.tty) {
      process.stdout.write("\x1b[?25l"); // no cursor blinking over the table
      this.timer = setInterval(() => this.draw(), 1000);
      this.draw();
    } else {
      process.stdout.write(header(this.addr).join("\n") + "\n\n");
      this.timer = setInterval(() => this.printTable(), 10_000);
    }
  }

  /** The table with the addresses above it: a log read later still has them at hand. */
  printTable(): void {
    const a = this.addr;
    const where = `  API ${a.api} · status page ${a.statusPage} · sink ${a.sink} · simulator ${a.simControl}/state`;
    process.stdout.write(["", where, ...table(deviceRows(this.devices.values())).map((l) => "  " + l), ""].join("\n") + "\n");
  }

  private draw(): void {
    const text = screen(this.addr, this.devices.values(), this.story, process.stdout.rows ?? 40, process.stdout.columns ?? 200);
    process.stdout.write("\x1b[H" + text.split("\n").join("\x1b[K\n") + "\x1b[K\x1b[J");
  }

  /** Stops redrawing; a terminal keeps the last screen and gets its cursor back. */
  end(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.tty) {
      this.draw();
      process.stdout.write("\n\x1b[?25h");
    }
  }
}

function demoDevices(tcpPort: number) {
  const tcp = { device_type: "modbus", mb_type: 2, mb_ip: "127.0.0.1", mb_port: tcpPort } as const;
  const rtu = { device_type: "modbus", mb_type: 1, mb_baud: 9600, mb_rtu_no: 1 } as const;
  return [
    {
      ...tcp,
      device_id: "battery",
      device_name: "Battery inverter",
      device_integration: `${ORG}/sunspec`,
      mb_device_type: 3,
      mb_slave_id: 1,
    },
    { ...tcp, device_id: "pv", device_name: "PV inverter", device_integration: `${ORG}/sunspec`, mb_device_type: 2, mb_slave_id: 2 },
    { ...tcp, device_id: "grid", device_name: "Grid meter", device_integration: `${ORG}/sunspec`, mb_device_type: 1, mb_slave_id: 3 },
    { ...rtu, device_id: "sdm", device_name: "SDM630 meter", device_integration: `${ORG}/sdm630`, mb_device_type: 1, mb_slave_id: 10 },
    { ...rtu, device_id: "relay", device_name: "Relay", device_integration: `${ORG}/relay-coils`, mb_device_type: 99, mb_slave_id: 11 },
  ];
}

/** The gateway's config, written 0600 (it carries the hashes of the demo's secrets). */
function writeConfig(dir: string, ports: Ports, cert: { certFile: string; keyFile: string }, ttyGW: string): string {
  const config = {
    site_id: SITE,
    organization_id: ORG,
    api_version: "v1",
    data_dir: "./data",
    log_level: "info",
    http: { listen: `127.0.0.1:${ports.api.port}`, tls: { cert: cert.certFile, key: cert.keyFile } },
    auth: {
      client_id: "partner-portal",
      users: [{ username: "partner", password_hash: hashSecret(PASSWORD) }],
      token_ttl_s: 3600,
      api_keys: [{ name: "partner", key_hash: hashSecret(API_KEY) }],
      ip_allowlist: ["127.0.0.1/32", "::1/128"],
    },
    partner: {
      headers: [{ name: "X-Partner-Key", value: "demo" }],
      execution_url: `https://127.0.0.1:${ports.sink.port}/exec`,
      data_push_url: `https://127.0.0.1:${ports.sink.port}`,
      data_push_path: "telemetry",
      ca_file: cert.certFile,
    },
    rtu_ports: { "1": ttyGW },
    telemetry: { poll_interval_ms: 1000, retention_max_mb: 64 },
    devices: demoDevices(ports.modbus.port),
    ui: { enabled: true },
  };
  const file = join(dir, "config.yaml");
  writeFileSync(file, stringify(config), { mode: 0o600 });
  chmodSync(file, 0o600); // a config left by an older demo at 0644
  return file;
}

/**
 * The simulator in its own process group, socat with it: the terminal's Ctrl-C reaches only
 * this script, and the gateway puts the devices back on a simulator that still runs.
 */
class DemoSim {
  private code: number | null = null;
  readonly exited: Promise<number>;

  constructor(
    readonly child: ChildProcess,
    readonly controlUrl: string,
    private readonly errors: () => string,
  ) {
    this.exited = new Promise((r) => child.once("exit", (c, sig) => r((this.code = c ?? (sig ? 128 : 1)))));
  }

  get exitCode(): number | null {
    return this.code;
  }

  async state(): Promise<SimState> {
    const r = await fetch(`${this.controlUrl}/state`);
    if (!r.ok) throw new Error(`simulator /state: ${r.status}`);
    return (await r.json()) as SimState;
  }

  /** Waits until the control API answers; fails with the simulator's own words if it exits first. */
  async ready(boundMs: number): Promise<void> {
    const end = Date.now() + boundMs;
    for (;;) {
      if (this.code !== null) throw new Error(`the simulator exited (${this.code}): ${this.errors()}`);
      if (
        await this.state().then(
          () => true,
          () => false,
        )
      )
        return;
      if (Date.now() > end) throw new Error(`the simulator did not answer within ${boundMs / 1000} s: ${this.errors()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async stop(): Promise<void> {
    if (this.code === null) this.child.kill("SIGTERM");
    await this.exited;
  }
}

/** The demo site on the demo's ports, its pty pair in the demo folder, its sun at `longitude`. */
async function startDemoSim(dir: string, ports: Ports, longitude: number): Promise<DemoSim> {
  const sc = parse(readFileSync(join(root, "hw-sim/scenarios/demo-site.yaml"), "utf8")) as Record<string, any>;
  sc.control = { listen: `127.0.0.1:${ports.sim.port}` };
  sc.site = { ...sc.site, longitude_deg: longitude };
  for (const p of sc.ports as Array<Record<string, unknown>>) {
    if (p.kind === "tcp") p.listen = `127.0.0.1:${ports.modbus.port}`;
    if (p.kind === "rtu") Object.assign(p, { path: join(dir, "ttySIM"), peer: join(dir, "ttyGW") });
  }
  const file = join(dir, "scenario.yaml");
  writeFileSync(file, stringify(sc));
  const child = spawn(process.execPath, [join(dist, "hw-sim/cli.js"), "--scenario", file, "--base-dir", dir], {
    cwd: root,
    stdio: ["ignore", "ignore", "pipe"],
    // Its log is not shown (the story reads /state): only its errors, on stderr, matter.
    env: { ...process.env, LOG_FORMAT: "json", LOG_LEVEL: "error" },
    detached: true,
  });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
  const sim = new DemoSim(child, `http://127.0.0.1:${ports.sim.port}`, () => err.trim() || "(nothing on stderr)");
  try {
    await sim.ready(20_000);
  } catch (e) {
    await sim.stop();
    throw e;
  }
  return sim;
}

/** The longitude whose mean solar time the machine's time zone keeps (15 degrees per hour). */
export function zoneLongitude(now = new Date()): number {
  return (-now.getTimezoneOffset() / 60) * 15;
}

interface Gateway {
  child: ChildProcess;
  /** The last warning and error lines: the reason shown when it fails. */
  troubles: string[];
  exited: Promise<number>;
}

function startGateway(configFile: string, board: Board): Gateway {
  const child = spawn(process.execPath, [join(dist, "src/cli.js"), "run", "--config", configFile], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LOG_FORMAT: "json" },
    // Its own process group: the terminal's Ctrl-C reaches only this script, which stops
    // the gateway first (it puts the devices back on the still running simulator).
    detached: true,
  });
  const troubles: string[] = [];
  const onLine = (line: string) => {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      if (line.trim()) troubles.push(line.trim());
      return;
    }
    const msg = String(o.msg ?? "");
    const id = typeof o.device_id === "string" ? o.device_id : undefined;
    if (id && msg.startsWith("paired")) {
      const identity = /^paired with (.*) \(profile/.exec(msg)?.[1] ?? "(the profile reads no identity)";
      const d = board.devices.get(id);
      if (d) d.identity = identity;
      board.say(`paired ${id}: ${identity}`);
    }
    if (Number(o.level) >= 40) {
      const { level: _l, time: _t, pid: _p, hostname: _h, name: _n, msg: _m, ...rest } = o;
      const text = `${Number(o.level) >= 50 ? "error" : "warning"}: ${msg} ${JSON.stringify(rest)}`;
      troubles.push(text);
      if (troubles.length > 8) troubles.shift();
      board.say(`gateway ${text}`);
    }
  };
  for (const s of [child.stdout!, child.stderr!]) {
    let buf = "";
    s.on("data", (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
    s.on("end", () => buf && onLine(buf)); // a last line without a newline (a CLI error) counts too
  }
  // "close", not "exit": its last output lines are read by then.
  const exited = new Promise<number>((r) =>
    child.once("close", (code, sig) => {
      if (sig) troubles.push(`ended by ${sig} (a signal before its own handlers were set up, or SIGKILL)`);
      r(code ?? 128);
    }),
  );
  return { child, troubles, exited };
}

/** A JSON request to the gateway over HTTPS, trusting the demo's certificate. */
function call(ports: Ports, ca: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolveCall, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: ports.api.port,
        method,
        path,
        ca,
        headers: { "x-api-key": API_KEY, ...(data ? { "content-type": "application/json" } : {}) },
        timeout: 10_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          let json: unknown = null;
          try {
            json = JSON.parse(text);
          } catch {
            json = text;
          }
          resolveCall({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer in 10 s")));
    req.on("error", reject);
    req.end(data);
  });
}

/** Polls pred every 250 ms until it holds, or fails with `what` after boundMs. */
async function until(pred: () => boolean | Promise<boolean>, what: string, boundMs: number, failed: () => string | null): Promise<void> {
  const end = Date.now() + boundMs;
  while (!(await pred())) {
    const f = failed();
    if (f) throw new Error(f);
    if (Date.now() > end) throw new Error(`no ${what} within ${boundMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

type Call = (method: string, path: string, body?: unknown) => Promise<{ status: number; json: any }>;

interface Story {
  call: Call;
  sim: DemoSim;
  sink: PartnerSink;
  board: Board;
  failed: () => string | null;
  /** What to try next, shown when the story is done. */
  next: string[];
}

function slot(type: string, quantity: number, priority: number, startInS: number, durationS: number) {
  const start = Date.now() + startInS * 1000;
  return {
    event_id: randomUUID(),
    start_time: new Date(start).toISOString(),
    end_time: new Date(start + durationS * 1000).toISOString(),
    event_type: type,
    event_quantity: quantity,
    event_unit: "kW",
    priority,
    mandatory: false,
    cancelled: false,
  };
}

/** POST /dr with one event; prints the receipt. */
async function submit(s: Story, ev: ReturnType<typeof slot>, about: string): Promise<void> {
  s.board.say(`-> POST /v1/api/gateway/${SITE}/dr  ${ev.event_type} ${ev.event_quantity} kW, priority ${ev.priority}: ${about}`);
  const r = await s.call("POST", `/v1/api/gateway/${SITE}/dr`, { mode: "live", event_slots: [ev] });
  const receipt = JSON.stringify(r.json);
  s.board.say(`<- receipt ${r.status} ${receipt}`);
  if (r.status !== 200) throw new Error(`the gateway refused the ${ev.event_type}: ${r.status} ${receipt}`);
}

function responseFor(s: Story, eventId: string): Record<string, any> | undefined {
  return s.sink.accepted("/exec").find((r) => (r.body as { event_id?: string })?.event_id === eventId)?.body as
    | Record<string, any>
    | undefined;
}

async function awaitResponse(s: Story, eventId: string, boundMs: number): Promise<void> {
  await until(() => responseFor(s, eventId) !== undefined, `execution response for ${eventId}`, boundMs, s.failed);
}

/** The devices as the simulator has them: what actually moved. */
async function simLine(sim: DemoSim): Promise<string> {
  const st = await sim.state();
  const b = st.devices.battery as { power_w: number; soc_pct?: number };
  const coils = (st.devices.relay as { coils: boolean[] }).coils.map((c) => (c ? "on" : "off")).join(" ");
  return `site: battery ${kw(b.power_w)}, relay coils ${coils}, grid ${gridText(st.site.grid_w as number)}`;
}

async function runStory(s: Story): Promise<void> {
  const { board, sim } = s;
  board.say("the dispatch story: a discharge, then a shed and a restore, through the partner API");
  board.say(await simLine(sim));
  const dis = slot("discharge", 3, 10, 2, 20);
  await submit(s, dis, "the battery delivers 3 kW for 20 s");
  await until(
    async () => Math.abs(((await sim.state()).devices.battery as { power_w: number }).power_w - 3000) < 150,
    "battery at 3 kW",
    30_000,
    s.failed,
  );
  board.say(await simLine(sim));
  await awaitResponse(s, dis.event_id, 60_000);
  board.say(await simLine(sim));
  const shed = slot("shed", 1.5, 20, 2, 120);
  await submit(s, shed, "1.5 kW of load off for up to 2 minutes");
  const coilsOff = async () => ((await sim.state()).devices.relay as { coils: boolean[] }).coils.every((c) => !c);
  await until(coilsOff, "relay coils open", 30_000, s.failed);
  board.say(await simLine(sim));
  // A few seconds of shed on screen before the partner calls it off.
  await new Promise((r) => setTimeout(r, 5000));
  const restore = slot("restore", 1.5, 20, 1, 3);
  await submit(s, restore, "ends the shed now and puts back what it changed");
  await awaitResponse(s, shed.event_id, 60_000);
  await awaitResponse(s, restore.event_id, 60_000);
  board.say(await simLine(sim));
  board.say("the dispatch story is done; telemetry goes on (Ctrl-C stops everything)");
  board.block(s.next);
}

/** "completed: 2.99 of 3 kW delivered (measured), battery completed". */
export function executionSummary(b: Record<string, unknown>): string {
  const d = (b.details ?? {}) as Record<string, unknown>;
  const parts = [String(b.status)];
  if (typeof d.delivered_quantity === "number")
    parts.push(
      `${Number(d.delivered_quantity.toPrecision(3))} of ${String(d.requested_quantity)} ${String(d.unit ?? "")} delivered${d.measured ? " (measured)" : ""}`,
    );
  if (typeof d.ended_by === "string") parts.push(d.ended_by);
  const devices = Array.isArray(d.devices) ? (d.devices as Array<{ device_id: string; status: string }>) : [];
  if (devices.length) parts.push(devices.map((x) => `${x.device_id} ${x.status}`).join(", "));
  return parts.join("; ");
}

/** Shows what reaches the sink: data pushes update the table, execution responses go in the story. */
function watchSink(sink: PartnerSink, board: Board): void {
  sink.onRequest = (r) => {
    const b = r.body as { devices?: Array<{ device_id: string; metrics: Record<string, number> }>; event_id?: string; status?: string };
    if (r.path === "/exec") {
      board.say(`<- at the sink: execution response ${b.event_id}: ${executionSummary(b as Record<string, unknown>)}`);
      return;
    }
    for (const dev of b?.devices ?? []) {
      const d = board.devices.get(dev.device_id);
      if (d) d.metrics = { ...d.metrics, ...dev.metrics };
    }
  };
}

async function pollOpModes(s: { call: Call; board: Board }): Promise<void> {
  try {
    const r = await s.call("GET", `/v1/api/gateway/${SITE}/devicesync`);
    for (const d of (r.json?.devices ?? []) as Array<{ device_id: string; device_op_mode?: number }>) {
      const row = s.board.devices.get(d.device_id);
      if (row && d.device_op_mode !== undefined) row.op_mode = d.device_op_mode;
    }
  } catch {
    // not listening yet, or stopping: the next look tries again
  }
}

async function main(): Promise<number> {
  let ports: Ports;
  try {
    ports = demoPorts();
  } catch (e) {
    process.stderr.write(`make run: ${(e as Error).message}\n`);
    return 2;
  }
  const busy = await portsInUse(ports);
  if (busy.length) {
    process.stderr.write(busy.map((l) => `make run: ${l}\n`).join(""));
    return 1;
  }
  // Taken from here on: a Ctrl-C while the simulator starts (in its own process group, which
  // the terminal's signal does not reach) lets the start finish, then stops everything.
  const stopped = new Promise<void>((r) => {
    process.once("SIGINT", () => r());
    process.once("SIGTERM", () => r());
  });
  const dir = resolve(process.env.SITEGATE_DEMO_DIR || join(root, "var", "demo"));
  // A fresh site each run: the story starts with the devices pairing.
  rmSync(join(dir, "data"), { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const longitude = process.env.SITEGATE_DEMO_LONGITUDE ? Number(process.env.SITEGATE_DEMO_LONGITUDE) : zoneLongitude();
  // its own certificate in its folder (inside the clone), not a fixed name in the shared /tmp
  const cert = certIn(join(dir, "tls"));
  const sim = await startDemoSim(dir, ports, longitude);
  const sink = await PartnerSink.start({ cert: cert.cert, key: cert.key, port: ports.sink.port }).catch(async (e: Error) => {
    await sim.stop();
    throw e;
  });
  const configFile = writeConfig(dir, ports, cert, join(dir, "ttyGW"));
  const api = `https://127.0.0.1:${ports.api.port}`;
  const board = new Board({
    api,
    statusPage: `${api}/ui/`,
    sink: sink.url,
    simControl: sim.controlUrl,
    config: configFile,
    password: PASSWORD,
    apiKey: API_KEY,
  });
  for (const d of demoDevices(ports.modbus.port))
    board.devices.set(d.device_id, { device_id: d.device_id, profile: d.device_integration.split("/")[1], identity: "" });
  watchSink(sink, board);
  board.start();
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  board.say(
    `simulated sun at ${longitude} degrees east (time zone ${zone}); PV now ${kw((await sim.state()).devices.pv.power_w as number)}`,
  );
  const gw = startGateway(configFile, board);
  const next = tryNext({ root, config: configFile, caFile: cert.certFile, apiPort: ports.api.port, apiKey: API_KEY, site: SITE });
  return supervise({ ports, ca: cert.cert, sim, sink, board, gw, stopped, next });
}

async function supervise(x: {
  ports: Ports;
  ca: string;
  sim: DemoSim;
  sink: PartnerSink;
  board: Board;
  gw: Gateway;
  stopped: Promise<void>;
  next: string[];
}): Promise<number> {
  const { stopped } = x;
  const { board, gw, sim, sink } = x;
  let gwCode: number | null = null;
  let stopping = false;
  void gw.exited.then((c) => (gwCode = c));
  const failed = () =>
    stopping
      ? null
      : gwCode !== null
        ? `the gateway exited (${gwCode})`
        : sim.exitCode !== null
          ? `the simulator exited (${sim.exitCode})`
          : null;
  const callApi: Call = (m, p, b) => call(x.ports, x.ca, m, p, b);
  const opModes = setInterval(() => void pollOpModes({ call: callApi, board }), 1000);
  let failure: string | null = null;
  const story = (async () => {
    board.say("starting the gateway; waiting for the devices to pair and the first data push at the sink");
    const allIn = () => [...board.devices.values()].every((d) => d.metrics && Object.keys(d.metrics).length > 0);
    await until(allIn, "data push with every device", START_BOUND_MS, failed);
    board.say(`first data push at the sink (${sink.accepted("/v1/telemetry").length} so far)`);
    await runStory({ sim, sink, board, failed, call: callApi, next: x.next });
  })().catch((e: Error) => {
    failure = e.message;
  });
  // Ends on Ctrl-C, on a failed story, or when the gateway exits by itself.
  await Promise.race([stopped, story.then(() => (failure ? undefined : stopped)), gw.exited, sim.exited]);
  if (!failure) failure = failed();
  stopping = true;
  board.say(failure ? `FAILED: ${failure}` : "stopping the gateway (it puts the devices back), then the simulator and the sink");
  if (gwCode === null) {
    gw.child.kill("SIGTERM");
    // The gateway exits within STOP_EXIT_MS of the signal whatever happens.
    const bound = new Promise<number>((r) => setTimeout(() => r(-1), STOP_EXIT_MS + 1000).unref());
    gwCode = await Promise.race([gw.exited, bound]);
    if (gwCode === -1) gw.child.kill("SIGKILL");
  }
  clearInterval(opModes);
  if (gwCode !== 0 && !failure) failure = `the gateway stopped with exit code ${gwCode}`;
  await sink.stop();
  await sim.stop();
  board.end();
  if (failure) {
    process.stderr.write(`make run failed: ${failure}\n`);
    if (gw.troubles.length) process.stderr.write(`the gateway's last warnings and errors:\n${gw.troubles.map((l) => `  ${l}\n`).join("")}`);
    return 1;
  }
  process.stdout.write("stopped cleanly\n");
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`make run failed: ${(e as Error).stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
