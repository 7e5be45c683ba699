// `make run`: the whole bench on one laptop. Starts the simulator with the demo site,
// a local HTTPS partner sink, and the gateway configured for the demo devices, then
// shows the data pushes arriving at the sink. Ctrl-C stops everything.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { hashSecret } from "../../src/util/secret-hash.js";
import { testCert } from "./tls.js";
import { STOP_EXIT_MS } from "../../src/lifecycle.js";

const root = resolve(fileURLToPath(import.meta.url), "../../../..");
const dist = join(root, "dist");
const varDir = join(root, "var", "demo");

const SINK_PORT = 18443;
const API_PORT = 8443;
const PASSWORD = "partner";
const API_KEY = "demo-api-key";
const ORG = "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f";

function start(name: string, args: string[], onLine: (line: string) => void): ChildProcess {
  const child = spawn(process.execPath, args, {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LOG_FORMAT: "json" },
    // Its own process group: the terminal's Ctrl-C reaches only this script, which stops
    // the gateway first (it puts the devices back on the still running simulator).
    detached: true,
  });
  let buf = "";
  const feed = (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  };
  child.stdout!.on("data", feed);
  child.stderr!.on("data", feed);
  child.on("exit", (code, sig) => process.stdout.write(`[${name}] exited (${sig ?? code})\n`));
  return child;
}

function logLine(name: string, pick: (o: Record<string, unknown>) => string | null) {
  return (line: string) => {
    try {
      const o = JSON.parse(line) as Record<string, unknown>;
      const text = pick(o);
      if (text) process.stdout.write(`[${name}] ${text}\n`);
    } catch {
      if (line.trim()) process.stdout.write(`[${name}] ${line}\n`);
    }
  };
}

async function main(): Promise<void> {
  mkdirSync(varDir, { recursive: true });
  const cert = testCert();
  const sim = start(
    "sim",
    [join(dist, "hw-sim/cli.js"), "--scenario", join(root, "hw-sim/scenarios/demo-site.yaml")],
    logLine("sim", (o) => (Number(o.level) >= 30 ? String(o.msg) : null)),
  );
  const sink = start(
    "sink",
    [join(dist, "test/support/partner-sink.js"), "--port", String(SINK_PORT), "--cert", cert.certFile, "--key", cert.keyFile],
    (line) => process.stdout.write(`[partner] ${line}\n`),
  );
  await new Promise((r) => setTimeout(r, 1500)); // the simulator makes its pty pair

  const tcp = { device_type: "modbus", mb_type: 2, mb_ip: "127.0.0.1", mb_port: 15020 } as const;
  const rtu = { device_type: "modbus", mb_type: 1, mb_baud: 9600, mb_rtu_no: 1 } as const;
  const config = {
    site_id: "site-001",
    organization_id: ORG,
    api_version: "v1",
    data_dir: "./data",
    log_level: "info",
    http: { listen: `127.0.0.1:${API_PORT}`, tls: { cert: cert.certFile, key: cert.keyFile } },
    auth: {
      client_id: "partner-portal",
      users: [{ username: "partner", password_hash: hashSecret(PASSWORD) }],
      token_ttl_s: 3600,
      api_keys: [{ name: "partner", key_hash: hashSecret(API_KEY) }],
      ip_allowlist: ["127.0.0.1/32", "::1/128"],
    },
    partner: {
      headers: [{ name: "X-Partner-Key", value: "demo" }],
      execution_url: `https://127.0.0.1:${SINK_PORT}/exec`,
      data_push_url: `https://127.0.0.1:${SINK_PORT}`,
      data_push_path: "telemetry",
      ca_file: cert.certFile,
    },
    rtu_ports: { "1": join(root, "var/ttyGW") },
    telemetry: { poll_interval_ms: 1000, retention_max_mb: 64 },
    devices: [
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
    ],
    ui: { enabled: true },
  };
  const configFile = join(varDir, "config.yaml");
  writeFileSync(configFile, stringify(config));
  const gw = start(
    "gateway",
    [join(dist, "src/cli.js"), "run", "--config", configFile],
    logLine("gateway", (o) => (Number(o.level) >= 30 ? `${String(o.msg)}${o.device_id ? ` (${String(o.device_id)})` : ""}` : null)),
  );

  process.stdout.write(
    [
      "",
      "sitegate demo",
      `  simulator control:  http://127.0.0.1:15080/state`,
      `  gateway API:        https://127.0.0.1:${API_PORT}  (user partner / ${PASSWORD}, X-API-Key: ${API_KEY})`,
      `  status page:        https://127.0.0.1:${API_PORT}/ui/  (user partner / ${PASSWORD})`,
      `  partner sink:       https://127.0.0.1:${SINK_PORT}`,
      `  config:             ${configFile}`,
      "  Ctrl-C stops everything.",
      "",
      "SD card: telemetry.commit_interval_s (the demo runs the default, 10 s):",
      ...commitIntervalTable(),
      "",
    ].join("\n") + "\n",
  );
  let stopping = false;
  const stop = () => {
    if (stopping) return; // a second Ctrl-C waits for the same stop
    stopping = true;
    process.stdout.write("stopping the gateway (it puts the devices back), then the simulator and the sink\n");
    const gone = new Promise((r) => (gw.exitCode !== null || gw.signalCode !== null ? r(null) : gw.once("exit", r)));
    gw.kill("SIGTERM");
    // The gateway exits within STOP_EXIT_MS of the signal whatever happens.
    const bound = new Promise((r) => setTimeout(r, STOP_EXIT_MS + 1000).unref());
    void Promise.race([gone, bound]).then(() => {
      for (const c of [gw, sink, sim]) if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM");
      setTimeout(() => process.exit(0), 2000).unref();
    });
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

/** The trade-off table of docs/sd-card.md (the rows after its marker line), as the README shows it. */
function commitIntervalTable(): string[] {
  const doc = readFileSync(join(root, "docs/sd-card.md"), "utf8").split("\n");
  const at = doc.findIndex((l) => l.includes("<!-- commit-interval-table -->"));
  const rows: string[] = [];
  for (let i = at + 1; at >= 0 && i < doc.length && doc[i].startsWith("|"); i++) if (!/^\|[-| ]+\|$/.test(doc[i])) rows.push(doc[i]);
  const cells = rows.map((r) =>
    r
      .slice(1, -1)
      .split("|")
      .map((c) => c.trim().replace(/`/g, "")),
  );
  const widths = cells[0]?.map((_, c) => Math.max(...cells.map((r) => r[c]?.length ?? 0))) ?? [];
  return cells.map(
    (r) =>
      "  " +
      r
        .map((c, i) => c.padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
  );
}

main().catch((e) => {
  process.stderr.write(`demo failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
