// Reading `strace -f -tt -yy` output: the main thread's calls in order, each with the
// path or socket its fd names. For the tests that prove a commit is on the disk (an fsync
// of the WAL) before the answer that acknowledges it leaves the process.
import { readFileSync } from "node:fs";

export interface Call {
  /** The thread that made the call. */
  tid: number;
  name: string;
  /** What -yy printed for the first argument's fd: a path, or TCP:[local->peer]. */
  target: string;
  /** The return value (bytes for a read or write; the new fd for accept4). */
  ret: number;
  line: string;
}

/** The strace flags the parser expects (before -o FILE and the command). */
export const STRACE_FLAGS = ["-f", "-tt", "-yy", "-s", "0", "-e", "trace=accept4,read,write,writev,pwrite64,fsync,fdatasync"];

const LINE = /^(\d+)\s+[\d:.]+\s+(\w+)\(\d+<(.*?)>(?:,|\))/;
const RET = /=\s+(-?\d+)/;
const RESUMED = /^(\d+)\s+[\d:.]+\s+<\.\.\. (\w+) resumed>/;

/** Every call of thread `tid` (the process's main thread when omitted: the first tid in the file). */
export function mainThreadCalls(file: string, tid?: number): Call[] {
  const out: Call[] = [];
  let main = tid;
  // The main thread's call that another thread's line interrupted, waiting for its "resumed" line.
  let open: Call | undefined;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const r = RESUMED.exec(line);
    if (r && open && Number(r[1]) === main && r[2] === open.name) {
      // Its rest (an accept4's new fd and peer, a write's byte count) is on this line; its start keeps the order.
      const ret = RET.exec(line.slice(r[0].length));
      open.ret = ret ? Number(ret[1]) : 0;
      open.line += line.slice(r[0].length);
      open = undefined;
      continue;
    }
    const m = LINE.exec(line);
    if (!m) continue;
    const t = Number(m[1]);
    main ??= t;
    if (t !== main) continue;
    const unfinished = /<unfinished \.\.\.>/.test(line);
    const ret = RET.exec(line.slice(m[0].length).replace(/<unfinished \.\.\.>.*/, ""));
    const call: Call = { tid: t, name: m[2], target: m[3], ret: ret && !unfinished ? Number(ret[1]) : 0, line };
    out.push(call);
    open = unfinished ? call : undefined;
  }
  return out;
}

const isWal = (c: Call, wal: string) => c.target.endsWith(wal);
const WRITES = new Set(["write", "writev", "pwrite64"]);
const SYNCS = new Set(["fsync", "fdatasync"]);

/**
 * For an answer (the index of its write in `calls`): the last write to the WAL before it,
 * and whether an fsync of the WAL lies between that write and the answer.
 */
export function syncedBefore(calls: Call[], answer: number, wal: string): { lastWalWrite: number; synced: boolean } {
  let lastWalWrite = -1;
  let synced = false;
  for (let i = 0; i < answer; i++) {
    const c = calls[i];
    if (!isWal(c, wal)) continue;
    if (WRITES.has(c.name)) {
      lastWalWrite = i;
      synced = false;
    } else if (SYNCS.has(c.name)) synced = true;
  }
  return { lastWalWrite, synced };
}

/** Indexes of the calls on the daemon's end of the TCP connection from client port `port`. */
export function connectionCalls(calls: Call[], port: number): number[] {
  const peer = `->127.0.0.1:${port}]`;
  return calls.flatMap((c, i) => (c.target.startsWith("TCP:") && c.target.endsWith(peer) ? [i] : []));
}

/** A TLS 1.3 alert record (close_notify): 5 bytes of header, 1 of type, 2 of alert, 16 of tag. */
const TLS_ALERT_BYTES = 24;

/**
 * The index of the daemon's HTTP answer on the connection from client port `port`: its last
 * write larger than an alert (the client asked for connection: close, so the answer is the
 * last record before close_notify; the handshake and session tickets come before it).
 */
export function answerWrite(calls: Call[], port: number): number {
  const conn = connectionCalls(calls, port).filter((i) => WRITES.has(calls[i].name) && calls[i].ret > TLS_ALERT_BYTES);
  return conn.length ? conn[conn.length - 1] : -1;
}

/** Index of the call that accepted the connection from client port `port`. */
export function acceptCall(calls: Call[], port: number): number {
  return calls.findIndex((c) => c.name === "accept4" && c.ret >= 0 && c.line.includes(`->127.0.0.1:${port}]`));
}

/** Whether a call wrote to file descriptor `fd` (1: stdout, where a CLI prints its answer). */
export function wroteToFd(c: Call, fd: number): boolean {
  return WRITES.has(c.name) && c.line.includes(` ${c.name}(${fd}<`);
}
