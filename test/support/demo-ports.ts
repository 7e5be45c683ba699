// The demo's addresses: fixed defaults (so a bookmarked status page keeps working), each
// changed by one variable. A port in use stops the demo before anything starts, naming the
// port and its variable: moving silently would leave the printed and bookmarked
// addresses pointing at whatever holds the port.
import { createServer } from "node:net";

export interface DemoPort {
  what: string;
  env: string;
  port: number;
}

const DEFAULTS = [
  { key: "api", what: "gateway API and status page", env: "SITEGATE_DEMO_PORT", port: 8443 },
  { key: "sink", what: "partner sink", env: "SITEGATE_DEMO_SINK_PORT", port: 18443 },
  { key: "sim", what: "simulator control API", env: "SITEGATE_DEMO_SIM_PORT", port: 15080 },
  { key: "modbus", what: "simulated Modbus TCP", env: "SITEGATE_DEMO_MODBUS_PORT", port: 15020 },
] as const;

export type PortKey = (typeof DEFAULTS)[number]["key"];

/** The four ports from the environment; a value that is not a port is an error naming its variable. */
export function demoPorts(env: NodeJS.ProcessEnv = process.env): Record<PortKey, DemoPort> {
  const out = {} as Record<PortKey, DemoPort>;
  for (const d of DEFAULTS) {
    const raw = env[d.env];
    const port = raw === undefined || raw === "" ? d.port : Number(raw);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`${d.env}=${raw} is not a port (1..65535)`);
    out[d.key] = { what: d.what, env: d.env, port };
  }
  const seen = new Map<number, DemoPort>();
  for (const p of Object.values(out)) {
    const other = seen.get(p.port);
    if (other) throw new Error(`${p.env} and ${other.env} are both ${p.port}; each needs its own port`);
    seen.set(p.port, p);
  }
  return out;
}

/** Whether 127.0.0.1:port can be bound now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/** One line per port in use: which port, what needed it, and how to choose another. */
export async function portsInUse(ports: Record<PortKey, DemoPort>): Promise<string[]> {
  const out: string[] = [];
  for (const p of Object.values(ports)) {
    if (!(await portFree(p.port)))
      out.push(`port ${p.port} (${p.what}) is in use on 127.0.0.1; choose another with ${p.env}, e.g. ${p.env}=${p.port + 1} make run`);
  }
  return out;
}
