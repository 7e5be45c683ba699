// Runs an installed systemd unit's commands by hand, for tests on a machine without systemd
// as PID 1: User=/Group= (with the user's supplementary groups, e.g. dialout) through
// setpriv, the unit's Environment= and WorkingDirectory=, RuntimeDirectory= made for it,
// ExecStartPre= lines in order ("-" may fail; "+" runs as root), ExecStart= in the background.
// As a script it is the `systemctl` shim of the install test: `unit-runner.js SHIM_DIR ARGS...`
// (enable --now UNIT, start UNIT, restart UNIT start it; stop UNIT stops it; others no-op).
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, chownSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface UnitFile {
  user?: string;
  group?: string;
  env: Record<string, string>;
  workingDirectory?: string;
  runtimeDirectory?: string;
  pre: string[];
  start: string;
}

/** The [Service] keys this runner honours (the first ExecStart=, every ExecStartPre=, merged Environment=). */
export function parseUnit(text: string): UnitFile {
  const u: UnitFile = { env: {}, pre: [], start: "" };
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    const eq = line.indexOf("=");
    if (line.startsWith("#") || eq < 0) continue;
    const k = line.slice(0, eq);
    const v = line.slice(eq + 1).trim();
    if (k === "User") u.user = v;
    else if (k === "Group") u.group = v;
    else if (k === "WorkingDirectory") u.workingDirectory = v;
    else if (k === "RuntimeDirectory") u.runtimeDirectory = v;
    else if (k === "ExecStartPre") u.pre.push(v);
    else if (k === "ExecStart" && !u.start) u.start = v;
    else if (k === "Environment") {
      for (const kv of v.split(/\s+/)) {
        const i = kv.indexOf("=");
        if (i > 0) u.env[kv.slice(0, i)] = kv.slice(i + 1);
      }
    }
  }
  if (!u.start) throw new Error("unit has no ExecStart=");
  return u;
}

function unitPath(name: string): string {
  const n = name.endsWith(".service") ? name : `${name}.service`;
  for (const d of ["/etc/systemd/system", "/lib/systemd/system"]) if (existsSync(join(d, n))) return join(d, n);
  throw new Error(`unit ${n} is not installed`);
}

/** argv for one Exec line: prefixes stripped; as the unit's user unless "+". */
function command(u: UnitFile, line: string): { argv: string[]; mayFail: boolean } {
  let l = line;
  let mayFail = false;
  let asRoot = false;
  while (/^[-+@!:]/.test(l)) {
    if (l[0] === "-") mayFail = true;
    if (l[0] === "+") asRoot = true;
    l = l.slice(1);
  }
  const words = l.split(/\s+/).filter(Boolean);
  if (asRoot || !u.user) return { argv: words, mayFail };
  return { argv: ["setpriv", `--reuid=${u.user}`, `--regid=${u.group ?? u.user}`, "--init-groups", "--", ...words], mayFail };
}

export interface Started {
  pid: number;
  log: string;
}

/** Starts an installed unit by hand; returns the main process id (detached, output in `log`). */
export function startUnit(name: string, stateDir: string): Started {
  const u = parseUnit(readFileSync(unitPath(name), "utf8"));
  const env: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8", ...u.env };
  if (u.runtimeDirectory) {
    const dir = join("/run", u.runtimeDirectory);
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    if (u.user) {
      const id = (flag: string, who: string) => Number(spawnSync("id", [flag, who], { encoding: "utf8" }).stdout.trim());
      chownSync(dir, id("-u", u.user), id("-g", u.group ?? u.user));
    }
    env.RUNTIME_DIRECTORY = dir;
  }
  const cwd = u.workingDirectory ?? "/";
  const log = join(stateDir, `${name}.log`);
  for (const pre of u.pre) {
    const c = command(u, pre);
    const r = spawnSync(c.argv[0], c.argv.slice(1), { cwd, env, encoding: "utf8" });
    appendFileSync(log, `ExecStartPre ${pre}: exit ${r.status}\n${r.stdout}${r.stderr}`);
    if (r.status !== 0 && !c.mayFail) throw new Error(`${name}: ExecStartPre failed (${r.status}): ${pre}\n${r.stderr}`);
  }
  const c = command(u, u.start);
  const fd = openSync(log, "a");
  const child = spawn(c.argv[0], c.argv.slice(1), { cwd, env, stdio: ["ignore", fd, fd], detached: true });
  child.unref();
  writeFileSync(join(stateDir, `${name}.pid`), String(child.pid));
  return { pid: child.pid!, log };
}

export function stopUnit(name: string, stateDir: string): void {
  const f = join(stateDir, `${name}.pid`);
  if (!existsSync(f)) return;
  const pid = Number(readFileSync(f, "utf8"));
  try {
    process.kill(-pid, "SIGTERM"); // the process group: setpriv execs the command, socat children follow
  } catch {
    /* already gone */
  }
  rmSync(f, { force: true });
  // like systemctl stop: return once it has exited (TimeoutStopSec of the unit is 10 s)
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 200 && alive(); i++) Atomics.wait(pause, 0, 0, 50);
  if (alive()) process.kill(-pid, "SIGKILL");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [stateDir, ...args] = process.argv.slice(2);
  appendFileSync(join(stateDir, "systemctl.calls"), args.join(" ") + "\n");
  const verb = args[0];
  const units = args.slice(1).filter((a) => !a.startsWith("-"));
  try {
    if ((verb === "enable" && args.includes("--now")) || verb === "start" || verb === "restart") {
      for (const unit of units) {
        if (verb === "restart") stopUnit(unit, stateDir);
        startUnit(unit, stateDir);
      }
    } else if (verb === "stop") {
      for (const unit of units) stopUnit(unit, stateDir);
    }
  } catch (e) {
    process.stderr.write(`systemctl (test shim): ${(e as Error).message}\n`);
    process.exitCode = 1;
  }
}
