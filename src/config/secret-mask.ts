// Secret values kept out of config error messages and snippets, decided by key name: hashes,
// passwords, keys, tokens and header values. A message may quote what a line holds; it never
// quotes what such a key holds.

const SECRET_KEY = /^(password|passwd|secret|token|key|keys|value|[a-z0-9_-]*_(hash|password|secret|token|key|keys))$/i;

/** True for a key whose value is a secret (`password_hash`, `key_hash`, `password`, `value`, `command_keys`). */
export function isSecretKey(name: string | number): boolean {
  return typeof name === "string" && SECRET_KEY.test(name);
}

/** True when a config path (`auth.users[0].password_hash`, `fleet.command_keys[1]`) leads through a secret key. */
export function isSecretPath(path: ReadonlyArray<string | number>): boolean {
  return path.some(isSecretKey);
}

const MASK = "***";

/** A key of one YAML line, block or flow (`password_hash:`, `"value":`), before its value. */
const KEY = /(^|[\s{,])(["']?)([A-Za-z0-9_-]+)\2\s*:(?=[ \t]|$)/g;

/** Where the value that starts at `start` ends: its closing quote, or a comment, or (in a flow mapping) a separator. */
function valueEnd(line: string, start: number, inFlow: boolean): number {
  const q = line[start];
  if (q === '"' || q === "'") {
    for (let i = start + 1; i < line.length; i++) {
      if (q === '"' && line[i] === "\\") i++;
      else if (line[i] === q && q === "'" && line[i + 1] === "'") i++;
      else if (line[i] === q) return i + 1;
    }
    return line.length;
  }
  const stop = (inFlow ? /\s+#|\s*[,}\]]/ : /\s+#/).exec(line.slice(start));
  return stop ? start + stop.index : line.trimEnd().length;
}

/** One line of a YAML file with the value of every secret key on it replaced by ***. */
export function maskLine(line: string): string {
  let out = "";
  let last = 0;
  for (const m of line.matchAll(KEY)) {
    if (!isSecretKey(m[3] ?? "")) continue;
    let start = m.index + m[0].length;
    while (line[start] === " " || line[start] === "\t") start++;
    const inFlow = line.lastIndexOf("{", m.index) > line.lastIndexOf("}", m.index);
    const end = valueEnd(line, start, inFlow);
    if (start < last || end <= start) continue;
    out += line.slice(last, start) + MASK;
    last = end;
  }
  return out + line.slice(last);
}

/** A value as an error message shows what was found: JSON-quoted and shortened, a secret masked. */
export function shownValue(value: unknown, secret: boolean): string {
  if (value === null || value === undefined) return "nothing (an empty value)";
  if (secret) return typeof value === "string" ? `a value of ${value.length} characters (not shown)` : "a value (not shown)";
  if (Array.isArray(value)) return `a list of ${value.length} item${value.length === 1 ? "" : "s"}`;
  if (typeof value === "object") return "a block of keys";
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}
