// Repeated keys in a JSON log line. JSON.parse keeps the last of two equal keys without a
// word, and pino writes a child logger's bindings and the call's own fields side by side,
// so `log.child({ part: "uplink" }).warn({ part: 0 })` makes a line `jq` reads wrongly.

/** The keys that appear twice in one object of `line` (any depth), as "path.key"; empty when none. */
export function repeatedKeys(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  const ws = () => {
    while (/\s/.test(line[i] ?? "")) i++;
  };
  const str = (): string => {
    const start = i;
    i++; // opening quote
    while (line[i] !== '"') i += line[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(line.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    ws();
    const c = line[i];
    if (c === "{") {
      i++;
      const seen = new Set<string>();
      ws();
      if (line[i] === "}") return void i++;
      for (;;) {
        ws();
        const key = str();
        if (seen.has(key)) out.push(path ? `${path}.${key}` : key);
        seen.add(key);
        ws();
        i++; // colon
        value(path ? `${path}.${key}` : key);
        ws();
        if (line[i++] === "}") return;
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (line[i] === "]") return void i++;
      for (let n = 0; ; n++) {
        value(`${path}[${n}]`);
        ws();
        if (line[i++] === "]") return;
      }
    }
    if (c === '"') return void str();
    while (i < line.length && !/[,}\]\s]/.test(line[i])) i++; // number, true, false, null
  };
  JSON.parse(line); // a line that is not JSON at all is not this check's business: it throws
  value("");
  return out;
}
