// `sitegate scan`: probes a bus for the unit ids that answer.
import { EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage, isSitegateError } from "../errors.js";
import { silentLogger } from "../log.js";
import { Bus } from "../modbus/bus.js";
import { ProbeInputError, checkEndpoint, checkScanRange, scanUnits, type ScanHit } from "../devices/commission.js";

function bar(done: number, total: number, found: number): string {
  const width = 30;
  const filled = Math.round((done / total) * width);
  return `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} probed, ${found} found`;
}

/** A scan stops after this long unless --max-s says otherwise (a wrong --timeout-ms on 247 silent ids is 40 minutes). */
const DEFAULT_MAX_S = 600;

const command: Command = {
  summary: "Probe unit ids (1..247 by default) and list the ones that answer.",
  usage: "sitegate scan --endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 [--from 1] [--to 247] [--timeout-ms 300] [--max-s 600] [--json]",
  options: {
    endpoint: { type: "string", short: "e" },
    from: { type: "string" },
    to: { type: "string" },
    "timeout-ms": { type: "string" },
    "max-s": { type: "string" },
    json: { type: "boolean" },
  },
  async run(values) {
    if (typeof values.endpoint !== "string") throw new UsageError("--endpoint is required");
    const maxS = Number(values["max-s"] ?? DEFAULT_MAX_S);
    if (!Number.isInteger(maxS) || maxS < 1 || maxS > 86_400) throw new UsageError("--max-s must be whole seconds 1..86400");
    let endpoint, range;
    try {
      endpoint = checkEndpoint(values.endpoint);
      range = checkScanRange(values.from, values.to, values["timeout-ms"]);
    } catch (e) {
      if (e instanceof ProbeInputError)
        throw new UsageError(e.message.replace(/^from\/to/, "--from/--to").replace(/^timeout/, "--timeout-ms"));
      throw e;
    }
    const bus = new Bus(endpoint, silentLogger());
    let found: ScanHit[];
    const tty = process.stderr.isTTY === true;
    // The time cap: the probes so far are the answer, with a note on what is left.
    const cap = new AbortController();
    const timer = setTimeout(() => cap.abort(), maxS * 1000);
    let probed = 0;
    try {
      found = await scanUnits(
        bus,
        range,
        (p) => {
          probed = p.probed;
          if (tty) process.stderr.write(bar(p.probed, p.total, p.found.length));
        },
        cap.signal,
      );
    } catch (e) {
      if (isSitegateError(e, "MODBUS_DISCONNECTED")) {
        if (tty) process.stderr.write("\n");
        process.stderr.write(`sitegate scan: ${errorMessage(e)}\n`);
        return 1;
      }
      throw e;
    } finally {
      clearTimeout(timer);
      await bus.close();
    }
    if (tty) process.stderr.write("\n");
    const total = range.to - range.from + 1;
    const capped = cap.signal.aborted && probed < total;
    if (capped)
      process.stderr.write(
        `sitegate scan: stopped at the ${maxS} s time cap after ${probed} of ${total} unit ids; go on with --from ${range.from + probed}\n`,
      );
    if (values.json) process.stdout.write(JSON.stringify({ endpoint: values.endpoint, found, probed, total, capped }) + "\n");
    else {
      process.stdout.write(
        found.length
          ? found.map((f) => `unit ${String(f.unit).padStart(3)}  answered (${f.answer})`).join("\n") + "\n"
          : "no unit answered\n",
      );
    }
    return EXIT_OK;
  },
};
export default command;
