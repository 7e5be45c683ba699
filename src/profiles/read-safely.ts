// Reading a profile file from disk without trusting it (DESIGN B9): a regular file only
// (never a FIFO, a device or a symlink out of its folder), at most 256 KiB, no world-
// writable file or folder, YAML parsed with depth and alias limits, and errors that name
// a line, a column and a key but never echo the file's content.
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, realpathSync, statSync, type Stats } from "node:fs";
import { dirname, relative, isAbsolute } from "node:path";
import { Lexer, parseDocument } from "yaml";
import { SitegateError } from "../errors.js";

/** The largest profile file read. */
export const PROFILE_MAX_BYTES = 256 * 1024;
/** The deepest nesting of collections a profile may have (the built-ins need 6). */
export const PROFILE_MAX_DEPTH = 32;
/** Aliases a profile may expand (merge keys count); a few shared blocks, not a billion laughs. */
export const PROFILE_MAX_ALIASES = 64;

const refuse = (message: string) => new SitegateError("PROFILE_INVALID", message);

/** Why a file or folder others may write cannot be trusted, or undefined. */
export function worldWritableProblem(st: Stats, what: string): string | undefined {
  return st.mode & 0o002 ? `${what} is world-writable: anyone on the machine could change what it holds (chmod o-w)` : undefined;
}

/** The folder's trust problem (world-writable, not a folder), or undefined. */
export function profilesDirProblem(dir: string): string | undefined {
  const st = statSync(dir);
  if (!st.isDirectory()) return "is not a directory";
  return worldWritableProblem(st, "the profiles folder");
}

/** Where a symlink in `dir` leads, if it stays inside the folder; the file itself otherwise. */
function target(file: string): string {
  const l = lstatSync(file);
  if (!l.isSymbolicLink()) return file;
  const real = realpathSync(file);
  const rel = relative(realpathSync(dirname(file)), real);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) throw refuse("is a symlink out of the profiles folder: not read");
  return real;
}

function notRegular(st: Stats): SitegateError | undefined {
  if (st.isFile()) return undefined;
  const kind = st.isFIFO()
    ? "a FIFO"
    : st.isCharacterDevice() || st.isBlockDevice()
      ? "a device"
      : st.isSocket()
        ? "a socket"
        : "not a file";
  return refuse(`is ${kind}, not a regular file: not read`);
}

/**
 * The text of a profile file, read safely: checked before it is opened (no open of a FIFO
 * or device), opened without following a link and without blocking, checked again on the
 * open descriptor, and never more than PROFILE_MAX_BYTES read.
 */
export function readProfileText(file: string): string {
  const path = target(file);
  const before = notRegular(statSync(path));
  if (before) throw before;
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = fstatSync(fd);
    const after = notRegular(st);
    if (after) throw after;
    const writable = worldWritableProblem(st, "the file");
    if (writable) throw refuse(writable);
    if (st.size > PROFILE_MAX_BYTES)
      throw refuse(`is ${st.size} bytes, over the ${PROFILE_MAX_BYTES / 1024} KiB a profile may have: not read`);
    const buf = Buffer.alloc(PROFILE_MAX_BYTES + 1);
    let n = 0;
    for (let r = 1; r > 0 && n < buf.length; n += r) r = readSync(fd, buf, n, buf.length - n, null);
    if (n > PROFILE_MAX_BYTES) throw refuse(`is over the ${PROFILE_MAX_BYTES / 1024} KiB a profile may have: not read`);
    return buf.toString("utf8", 0, n);
  } finally {
    closeSync(fd);
  }
}

/** Line and column (from 1) of an offset in the text. */
function lineCol(text: string, offset: number): string {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) {
    line++;
    start = i + 1;
  }
  return `line ${line}, column ${offset - start + 1}`;
}

/** Tokens the lexer adds that are not in the text (document, flow end and scalar markers). */
const LEXER_CONTROL = new Set(["\x02", "\x18", "\x1f"]);

/** The deepest flow nesting ([ {) of the text, from the YAML lexer (quoted text and comments are single tokens). */
function flowDepthOver(text: string, max: number): number | undefined {
  let depth = 0;
  let offset = 0;
  for (const token of new Lexer().lex(text)) {
    if (token === "[" || token === "{") {
      if (++depth > max) return offset;
    } else if (token === "]" || token === "}") depth = Math.max(0, depth - 1);
    if (!LEXER_CONTROL.has(token)) offset += token.length;
  }
  return undefined;
}

/** The first place the value nests deeper than `max`, as a path, or undefined. */
function depthOver(value: unknown, max: number, path = ""): string | undefined {
  if (value === null || typeof value !== "object") return undefined;
  if (max === 0) return path || "(top)";
  const entries = Array.isArray(value)
    ? value.map((v, i) => [`[${i}]`, v] as const)
    : Object.entries(value).map(([k, v]) => [`.${k}`, v] as const);
  for (const [k, v] of entries) {
    const hit = depthOver(v, max - 1, path + k);
    if (hit !== undefined) return hit;
  }
  return undefined;
}

/**
 * Parses a profile's YAML (JSON is YAML) with its limits: nesting depth, alias count and
 * unique keys. An error names where (line and column, or a key path) and never the text.
 */
export function parseProfileYaml(text: string): unknown {
  const deep = flowDepthOver(text, PROFILE_MAX_DEPTH);
  if (deep !== undefined) throw refuse(`nests deeper than ${PROFILE_MAX_DEPTH} levels at ${lineCol(text, deep)}`);
  const doc = parseDocument(text, { merge: true, uniqueKeys: true, prettyErrors: false });
  const first = doc.errors[0];
  if (first) throw refuse(`is not valid YAML: ${first.code} at ${lineCol(text, first.pos[0])}`);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: PROFILE_MAX_ALIASES });
  } catch (e) {
    const code = e instanceof Error && "code" in e ? String((e as { code: unknown }).code) : "INVALID";
    throw refuse(`is not valid YAML: ${code} (aliases are limited to ${PROFILE_MAX_ALIASES})`);
  }
  const over = depthOver(value, PROFILE_MAX_DEPTH);
  if (over !== undefined) throw refuse(`nests deeper than ${PROFILE_MAX_DEPTH} levels at ${over}`);
  return value;
}
