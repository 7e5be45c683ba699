// `sitegate config-schema`: the config file's JSON Schema (draft 2020-12), generated from the
// zod schema that validates the file, so an editor's completion and check-config never differ
// on a key. Refinements a JSON Schema cannot state (an https URL, a loopback host, a time
// zone) stay with check-config; the schema is the shape.
import { z } from "zod";
import { configSchema } from "../config/schema.js";
import { VERSION } from "../version.js";
import { EXIT_OK, type Command } from "./command.js";
import { configReferenceMarkdown } from "./config-reference.js";

/** The JSON Schema of the config file as a YAML file gives it (defaults optional). */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { target: "draft-2020-12", io: "input", unrepresentable: "any" });
  return {
    ...schema,
    $id: `https://sitegate.invalid/schema/config-${VERSION}.json`,
    title: "sitegate config file",
    description: "/etc/sitegate/config.yaml; check it with `sitegate check-config`",
  };
}

const command: Command = {
  summary: "Print the config file's JSON Schema (draft 2020-12), for editors (# yaml-language-server: $schema=FILE).",
  usage: "sitegate config-schema [--markdown] > sitegate-config.schema.json",
  options: { markdown: { type: "boolean" } },
  run(values) {
    // --markdown: the same schema as the key-by-key page docs/config-reference.md
    process.stdout.write(
      values.markdown ? configReferenceMarkdown(configJsonSchema()) : JSON.stringify(configJsonSchema(), null, 2) + "\n",
    );
    return Promise.resolve(EXIT_OK);
  },
};
export default command;
