// `sitegate read`: one device read once through its profile, its metrics decoded.
import { EXIT_FAILURE, EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage } from "../errors.js";
import { silentLogger } from "../log.js";
import { Bus } from "../modbus/bus.js";
import { builtinProfiles, type ProfileRegistry } from "../profiles/registry.js";
import type { Endpoint } from "../modbus/endpoint.js";
import { ProbeInputError, checkEndpoint, checkUnit, readDevice } from "../modbus/device/commission.js";

/** Parses --unit: 0..255 (0 and 248+ only make sense behind TCP gateways). */
export function parseUnit(v: unknown): number {
  if (typeof v !== "string") throw new UsageError("--unit must be a number 0..255");
  try {
    return checkUnit(v);
  } catch {
    throw new UsageError("--unit must be a number 0..255");
  }
}

/** Parses an endpoint given on the command line (tcp://HOST:PORT or rtu:/dev/ttyX?baud=N). */
export function parseEndpoint(text: string): Endpoint {
  try {
    return checkEndpoint(text);
  } catch (e) {
    throw new UsageError(e instanceof ProbeInputError ? e.message : errorMessage(e));
  }
}

/** Parses --profile: required, and one of `profiles`. */
export function parseProfile(v: unknown, profiles: ProfileRegistry): string {
  if (typeof v !== "string") throw new UsageError(`--profile is required (one of: ${profiles.names().join(", ")})`);
  if (!profiles.has(v)) throw new UsageError(`unknown profile "${v}" (known: ${profiles.names().join(", ")})`);
  return v;
}

const command: Command = {
  summary: "Read one device and print its decoded metrics (a table, or --json).",
  usage: "sitegate read --endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 --unit N --profile NAME [--json]",
  options: {
    endpoint: { type: "string", short: "e" },
    unit: { type: "string", short: "u" },
    profile: { type: "string", short: "p" },
    json: { type: "boolean" },
  },
  async run(values) {
    if (typeof values.endpoint !== "string") throw new UsageError("--endpoint is required");
    const profiles = builtinProfiles();
    const profile = parseProfile(values.profile, profiles);
    const unit = parseUnit(values.unit);
    const endpoint = parseEndpoint(values.endpoint);
    const bus = new Bus(endpoint, silentLogger());
    try {
      let got;
      try {
        got = await readDevice(bus, values.endpoint, unit, profiles, profile);
      } catch (e) {
        process.stderr.write(`sitegate read: ${errorMessage(e)}\n`);
        return EXIT_FAILURE;
      }
      const { device, metrics, labels, unavailable } = got;
      if (values.json) {
        process.stdout.write(JSON.stringify({ device, metrics, unavailable }) + "\n");
      } else {
        const rows = [
          ...Object.entries(device).map(([k, v]) => [k, labels[k] ? `${v} (${labels[k]})` : String(v)]),
          ["", ""],
          ...Object.entries(metrics).map(([k, v]) => [k, labels[k] ? `${v} (${labels[k]})` : String(v)]),
          ...unavailable.map((k) => [k, "unavailable"]),
        ];
        const w = Math.max(...rows.map(([k = ""]) => k.length));
        process.stdout.write(rows.map(([k, v]) => (k ? `${k.padEnd(w)}  ${v}` : "")).join("\n") + "\n");
      }
      return EXIT_OK;
    } finally {
      await bus.close();
    }
  },
};
export default command;
