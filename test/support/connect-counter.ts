// A plain TCP listener on a port whose server is down (a stopped broker's): it accepts each
// connection, notes when, and closes it at once, so a client sees its attempt fail as it
// would against the dead server and the test sees how often clients try.
import { createServer, type Server, type Socket } from "node:net";

export interface ConnectCounter {
  /** performance.now() of every connection accepted so far. */
  readonly at: number[];
  close(): Promise<void>;
}

export async function countConnects(port: number, host = "127.0.0.1"): Promise<ConnectCounter> {
  const at: number[] = [];
  const open = new Set<Socket>();
  const server: Server = createServer((s) => {
    at.push(performance.now());
    open.add(s);
    s.on("error", () => {});
    s.once("close", () => open.delete(s));
    s.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    at,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Connections per `bucketMs` from `start` to `end` (performance.now() instants). */
export function perBucket(at: readonly number[], start: number, end: number, bucketMs: number): number[] {
  // A tail shorter than half a bucket (the instants around the window's end) joins the last bucket.
  const n = Math.max(1, Math.round((end - start) / bucketMs));
  const out = Array<number>(n).fill(0);
  for (const t of at) if (t >= start && t < end) out[Math.min(n - 1, Math.floor((t - start) / bucketMs))]++;
  return out;
}
