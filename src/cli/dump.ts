// `sitegate dump`: a field capture of one device (every register its profile knows, with the
// answers, exceptions, silences and times; the serial number masked) as JSON on stdout, for a
// bug report or for `sitegate-sim --replay`. Either of a device named on the command line
// (--endpoint --unit --profile: the command opens the bus itself, as `sitegate read` does),
// or of a device of the config (--config FILE DEVICE_ID): while the daemon runs, through the
// daemon's control socket and its own bus queue (the daemon keeps polling; a serial port it
// holds is never opened twice); with no daemon running, directly as above.
import { CONFIG_OPTION, EXIT_FAILURE, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { silentLogger } from "../log.js";
import { loadConfig } from "../load-config.js";
import { Bus, PRIORITY } from "../modbus/bus.js";
import { endpointKey, type Endpoint } from "../modbus/endpoint.js";
import { siteProfiles, type ProfileRegistry } from "../profiles/registry.js";
import { captureDevice, type Capture } from "../modbus/device/capture.js";
import { endpointForDevice } from "../modbus/device/pool.js";
import { modbusSpec } from "../modbus/device/spec.js";
import { askDump, controlSocketPath } from "../control-socket.js";
import { parseEndpoint, parseProfile, parseUnit } from "./read.js";

/** Where the site's own profiles are unless --profiles-dir says otherwise (config's profiles_dir default). */
export const DEFAULT_PROFILES_DIR = "/etc/sitegate/profiles";
/** How long the command waits for the daemon's capture (a silent device costs a timeout per range). */
const DAEMON_WAIT_MS = 300_000;

/** A port another process holds: the one thing an installer must do about it, said plainly. */
function lockedHint(message: string): string {
  return /lock|busy|EBUSY|EACCES/i.test(message)
    ? `${message}\nthe port is in use (is the sitegate daemon running? stop it with \`systemctl stop sitegate\`, dump, then start it again)`
    : message;
}

/** Prints a capture; fails when not one range answered. */
function print(capture: Capture & Record<string, unknown>): number {
  const answered = capture.ranges.filter((r) => r.words).length;
  if (answered === 0) {
    const first = capture.ranges.find((r) => r.error)?.error;
    process.stderr.write(`sitegate dump: no range answered${first ? `: ${lockedHint(first)}` : ""}\n`);
    return EXIT_FAILURE;
  }
  process.stdout.write(JSON.stringify(capture, null, 1) + "\n");
  const via = capture.via === "daemon" ? " (through the running daemon)" : "";
  process.stderr.write(`sitegate dump: ${capture.ranges.length} ranges, ${answered} answered${via}\n`);
  return EXIT_OK;
}

/** Opens the bus itself and reads everything the profile knows. */
async function direct(endpoint: Endpoint, text: string, unit: number, profiles: ProfileRegistry, profile: string, timeoutMs: number) {
  const bus = new Bus(endpoint, silentLogger());
  const p = profiles.get(profile);
  // The device's own timing, as its profile gives it (a Huawei answers nothing for 1 s after a connect).
  bus.setDeviceDelay(unit, p.delay_ms, p.connect_delay_ms);
  try {
    const capture = await captureDevice(p, unit, (u, table, address, count) =>
      bus.read(u, table, address, count, { priority: PRIORITY.scan, timeoutMs, retries: 0 }),
    );
    return print({ endpoint: text, ...capture });
  } finally {
    await bus.close();
  }
}

/** `--config FILE DEVICE_ID`: through the running daemon, or directly when none runs. */
async function fromConfig(file: string, deviceId: string, timeoutMs: number): Promise<number> {
  const cfg = loadConfig(file);
  const device = cfg.devices.find((d) => d.device_id === deviceId);
  if (!device)
    throw new UsageError(
      `no device "${deviceId}" in ${file} (its Modbus devices: ${cfg.devices.map((d) => d.device_id).join(", ") || "none"})`,
    );
  const spec = modbusSpec(device);
  const endpoint = endpointForDevice(device, cfg.rtu_ports);
  const text = endpointKey(endpoint);
  const answer = await askDump(controlSocketPath(cfg.data_dir), deviceId, DAEMON_WAIT_MS);
  if (answer?.ok) return print({ endpoint: text, device_id: deviceId, via: "daemon", ...answer.capture });
  // The daemon runs but does not hold the device (not paired yet): it does not poll it either.
  if (answer && answer.code !== "DEVICE_NOT_FOUND") {
    process.stderr.write(`sitegate dump: the daemon could not dump ${deviceId}: ${answer.error}\n`);
    return EXIT_FAILURE;
  }
  const profiles = siteProfiles(cfg.profiles_dir);
  if (!profiles.has(spec.profile))
    throw new UsageError(`${deviceId}: unknown profile "${spec.profile}" (known: ${profiles.names().join(", ")})`);
  return direct(endpoint, text, spec.unit, profiles, spec.profile, timeoutMs);
}

const command: Command = {
  summary: "Read every register a device's profile knows and print a capture (JSON) for a bug report or sitegate-sim --replay.",
  usage:
    "sitegate dump --endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 --unit N --profile NAME [--timeout-ms 1000] [--profiles-dir DIR]\n" +
    "       sitegate dump --config FILE DEVICE_ID [--timeout-ms 1000]   (through the daemon while it runs)",
  options: {
    endpoint: { type: "string", short: "e" },
    unit: { type: "string", short: "u" },
    profile: { type: "string", short: "p" },
    "timeout-ms": { type: "string" },
    "profiles-dir": { type: "string" },
    ...CONFIG_OPTION,
  },
  async run(values, positionals) {
    const timeoutMs = Number(values["timeout-ms"] ?? 1000);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 50 || timeoutMs > 60_000)
      throw new UsageError("--timeout-ms must be whole milliseconds 50..60000");
    if (typeof values.endpoint !== "string") {
      if (typeof values.config !== "string" || positionals.length !== 1)
        throw new UsageError("give --endpoint, --unit and --profile, or --config FILE and one DEVICE_ID");
      return fromConfig(configFile(values), positionals[0]!, timeoutMs);
    }
    if (values.config !== undefined || positionals.length > 0)
      throw new UsageError("--endpoint dumps the device it names: no --config or DEVICE_ID with it");
    const profiles = siteProfiles(String(values["profiles-dir"] ?? DEFAULT_PROFILES_DIR));
    const profile = parseProfile(values.profile, profiles);
    const unit = parseUnit(values.unit);
    const endpoint = parseEndpoint(values.endpoint);
    return direct(endpoint, values.endpoint, unit, profiles, profile, timeoutMs);
  },
};
export default command;
