import { EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage, isSitegateError } from "../errors.js";
import { silentLogger } from "../log.js";
import { Bus, PRIORITY } from "../modbus/bus.js";
import { parseEndpoint } from "../modbus/endpoint.js";

function bar(done: number, total: number, found: number): string {
  const width = 30;
  const filled = Math.round((done / total) * width);
  return `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} probed, ${found} found`;
}

const command: Command = {
  summary: "Probe unit ids (1..247 by default) and list the ones that answer.",
  usage: "sitegate scan --endpoint tcp://HOST:PORT|rtu:/dev/ttyX?baud=9600 [--from 1] [--to 247] [--timeout-ms 300] [--json]",
  options: { endpoint: { type: "string", short: "e" }, from: { type: "string" }, to: { type: "string" }, "timeout-ms": { type: "string" }, json: { type: "boolean" } },
  async run(values) {
    if (typeof values.endpoint !== "string") throw new UsageError("--endpoint is required");
    let endpoint;
    try {
      endpoint = parseEndpoint(values.endpoint);
    } catch (e) {
      throw new UsageError(errorMessage(e));
    }
    const from = Number(values.from ?? 1);
    const to = Number(values.to ?? 247);
    const timeoutMs = Number(values["timeout-ms"] ?? 300);
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 1 || to > 247 || from > to) throw new UsageError("--from/--to must be 1..247, from <= to");
    if (!Number.isInteger(timeoutMs) || timeoutMs < 20) throw new UsageError("--timeout-ms must be >= 20");
    const bus = new Bus(endpoint, silentLogger());
    const found: Array<{ unit: number; answer: string }> = [];
    const tty = process.stderr.isTTY === true;
    try {
      for (let unit = from; unit <= to; unit++) {
        try {
          await bus.read(unit, "holding", 0, 1, { priority: PRIORITY.pairing, timeoutMs, retries: 0 });
          found.push({ unit, answer: "registers" });
        } catch (e) {
          if (isSitegateError(e, "MODBUS_EXCEPTION")) {
            const code = Number(e.details[0]?.message);
            // 10/11: a TCP gateway saying nobody is behind that unit id.
            if (code !== 10 && code !== 11) found.push({ unit, answer: `exception ${code}` });
          } else if (isSitegateError(e, "MODBUS_DISCONNECTED") && unit === from) {
            process.stderr.write(`sitegate scan: ${errorMessage(e)}\n`);
            return 1;
          }
        }
        if (tty) process.stderr.write(bar(unit - from + 1, to - from + 1, found.length));
      }
    } finally {
      if (tty) process.stderr.write("\n");
      await bus.close();
    }
    if (values.json) process.stdout.write(JSON.stringify({ endpoint: values.endpoint, found }) + "\n");
    else {
      process.stdout.write(found.length ? found.map((f) => `unit ${String(f.unit).padStart(3)}  answered (${f.answer})`).join("\n") + "\n" : "no unit answered\n");
    }
    return EXIT_OK;
  },
};
export default command;
