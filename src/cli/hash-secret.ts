// `sitegate hash-secret`: the scrypt hash of a secret read on stdin, for the config.
import { EXIT_OK, UsageError, type Command } from "./command.js";
import { hashSecret } from "../util/secret-hash.js";

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

const command: Command = {
  summary: "Read one secret on stdin and print its scrypt hash (for auth.users[].password_hash and auth.api_keys[].key_hash).",
  usage: "echo -n SECRET | sitegate hash-secret",
  options: {},
  async run() {
    if (process.stdin.isTTY) process.stderr.write("secret (end with Ctrl-D): ");
    // One trailing newline is the Enter key, not part of the secret.
    const secret = (await readStdin()).replace(/\r?\n$/, "");
    if (secret.length === 0) throw new UsageError("no secret on stdin");
    process.stdout.write(hashSecret(secret) + "\n");
    return EXIT_OK;
  },
};
export default command;
