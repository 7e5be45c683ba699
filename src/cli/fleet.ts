// `sitegate fleet sign`: signs one fleet command for a gateway that has fleet.command_keys
// (docs/security.md, Fleet commands). Prints the three MQTT v5 user properties to publish the
// command with, as JSON or as mosquitto_pub arguments. The payload must be published
// byte for byte as signed (mosquitto_pub -f FILE).
import { readFileSync } from "node:fs";
import { EXIT_OK, UsageError, type Command } from "./command.js";
import { errorMessage } from "../errors.js";
import { signCommand } from "../fleet/signing.js";
import { COMMANDS } from "../fleet/commands.js";

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const command: Command = {
  summary: "Sign a fleet command with an ed25519 private key; prints the MQTT v5 user properties to send it with.",
  usage: "sitegate fleet sign --key KEY.pem --site SITE_ID --command NAME [--body FILE|-] [--format json|mosquitto]",
  options: {
    key: { type: "string" },
    site: { type: "string" },
    command: { type: "string" },
    body: { type: "string" },
    format: { type: "string" },
  },
  async run(values, positionals) {
    if (positionals[0] !== "sign" || positionals.length !== 1) throw new UsageError('the only subcommand is "sign"');
    if (typeof values.key !== "string") throw new UsageError("--key is required (an ed25519 private key in PEM)");
    if (typeof values.site !== "string" || values.site === "") throw new UsageError("--site is required");
    const name = values.command;
    if (typeof name !== "string" || !(COMMANDS as readonly string[]).includes(name))
      throw new UsageError(`--command must be one of: ${COMMANDS.join(", ")}`);
    const format = values.format ?? "json";
    if (format !== "json" && format !== "mosquitto") throw new UsageError("--format must be json or mosquitto");
    const from = values.body;
    if (from !== undefined && (typeof from !== "string" || from === "")) throw new UsageError("--body takes a file name, or - for stdin");
    const body = from === undefined ? Buffer.alloc(0) : from === "-" ? await readStdin() : readFileSync(from);
    let props: Record<string, string>;
    try {
      props = signCommand(readFileSync(values.key, "utf8"), { site: values.site, name, body });
    } catch (e) {
      throw new UsageError(`--key: ${errorMessage(e)}`);
    }
    if (format === "json") process.stdout.write(JSON.stringify(props) + "\n");
    else
      process.stdout.write(
        Object.entries(props)
          .map(([k, v]) => `-D publish user-property ${k} ${v}`)
          .join(" ") + "\n",
      );
    return EXIT_OK;
  },
};
export default command;
