// A TCP relay between a gateway and its broker that a test can cut and open again: the
// gateway's connection drops while the broker (and every session it keeps) stays up. It
// counts the connection attempts it sees and the bytes each way, so tests and benchmarks
// can tell how often a gateway retries and what a message costs on the wire.
import { createServer, connect, type Server, type Socket } from "node:net";

export interface TcpProxy {
  port: number;
  /** Connections accepted (open or cut: each is an attempt). */
  attempts: number;
  /** Bytes gateway -> broker and broker -> gateway, over all connections. */
  up: number;
  down: number;
  /** Drop every connection and refuse new ones (accepted, then closed at once). */
  cut(): void;
  open(): void;
  close(): Promise<void>;
}

export async function startProxy(targetPort: number): Promise<TcpProxy> {
  const live = new Set<Socket>();
  let isOpen = true;
  const p: TcpProxy = {
    port: 0,
    attempts: 0,
    up: 0,
    down: 0,
    cut() {
      isOpen = false;
      for (const s of live) s.destroy();
      live.clear();
    },
    open() {
      isOpen = true;
    },
    close: () =>
      new Promise<void>((r) => {
        p.cut();
        server.close(() => r());
      }),
  };
  const server: Server = createServer((client) => {
    p.attempts++;
    if (!isOpen) return void client.destroy();
    const broker = connect(targetPort, "127.0.0.1");
    live.add(client);
    live.add(broker);
    client.on("data", (d: Buffer) => (p.up += d.length));
    broker.on("data", (d: Buffer) => (p.down += d.length));
    client.pipe(broker);
    broker.pipe(client);
    const end = () => {
      client.destroy();
      broker.destroy();
      live.delete(client);
      live.delete(broker);
    };
    client.on("error", end).on("close", end);
    broker.on("error", end).on("close", end);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  p.port = (server.address() as { port: number }).port;
  return p;
}
