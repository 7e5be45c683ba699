// `sitegate dump`: a field capture of one device (every register its profile knows, with the
// answers, exceptions, silences and times; the serial number masked) as JSON on stdout, for a
// bug report or for `sitegate-sim --replay`. It opens the bus itself, as `sitegate read`
// does: on a serial port the daemon holds, stop the daemon first (the port is locked).
import { EXIT_FAILURE, EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage } from "../errors.js";
import { silentLogger } from "../log.js";
import { Bus, PRIORITY } from "../modbus/bus.js";
import { siteProfiles } from "../profiles/registry.js";
import { ProbeInputError, checkEndpoint } from "../modbus/device/commission.js";
import { captureDevice } from "../modbus/device/capture.js";
import { parseUnit } from "./read.js";

/** Where the site's own profiles are unless --profiles-dir says otherwise (config's profiles_dir default). */
const DEFAULT_PROFILES_DIR = "/etc/sitegate/profiles";

/** A port another process holds: the one thing an installer must do about it, said plainly. */
function lockedHint(message: string): string {
  return /lock|busy|EBUSY|EACCES/i.test(message)
    ? `${message}\nthe port is in use (is the sitegate daemon running? stop it with \`systemctl stop sitegate\`, dump, then start it again)`
    : message;
}

const command: Command = {
  summary: "Read every register a device's profile knows and print a capture (JSON) for a bug report or sitegate-sim --replay.",
  usage:
    "sitegate dump --endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 --unit N --profile NAME [--timeout-ms 1000] [--profiles-dir DIR]",
  options: {
    endpoint: { type: "string", short: "e" },
    unit: { type: "string", short: "u" },
    profile: { type: "string", short: "p" },
    "timeout-ms": { type: "string" },
    "profiles-dir": { type: "string" },
  },
  async run(values) {
    if (typeof values.endpoint !== "string") throw new UsageError("--endpoint is required");
    const profiles = siteProfiles(String(values["profiles-dir"] ?? DEFAULT_PROFILES_DIR));
    if (typeof values.profile !== "string") throw new UsageError(`--profile is required (one of: ${profiles.names().join(", ")})`);
    if (!profiles.has(values.profile)) throw new UsageError(`unknown profile "${values.profile}" (known: ${profiles.names().join(", ")})`);
    const unit = parseUnit(values.unit);
    const timeoutMs = Number(values["timeout-ms"] ?? 1000);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 50 || timeoutMs > 60_000)
      throw new UsageError("--timeout-ms must be whole milliseconds 50..60000");
    let endpoint;
    try {
      endpoint = checkEndpoint(values.endpoint);
    } catch (e) {
      throw new UsageError(e instanceof ProbeInputError ? e.message : errorMessage(e));
    }
    const bus = new Bus(endpoint, silentLogger());
    const profile = profiles.get(values.profile);
    // The device's own timing, as its profile gives it (a Huawei answers nothing for 1 s after a connect).
    bus.setDeviceDelay(unit, profile.delay_ms, profile.connect_delay_ms);
    try {
      const capture = await captureDevice(profile, unit, (u, table, address, count) =>
        bus.read(u, table, address, count, { priority: PRIORITY.scan, timeoutMs, retries: 0 }),
      );
      const answered = capture.ranges.filter((r) => r.words).length;
      if (answered === 0) {
        const first = capture.ranges.find((r) => r.error)?.error;
        process.stderr.write(`sitegate dump: no range answered${first ? `: ${lockedHint(first)}` : ""}\n`);
        return EXIT_FAILURE;
      }
      process.stdout.write(JSON.stringify({ endpoint: values.endpoint, ...capture }, null, 1) + "\n");
      process.stderr.write(`sitegate dump: ${capture.ranges.length} ranges, ${answered} answered\n`);
      return EXIT_OK;
    } finally {
      await bus.close();
    }
  },
};
export default command;
