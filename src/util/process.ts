// Small process-level helpers shared by the gateway, the simulator and the bench sink.

/** "host:port" or "[v6]:port" to its parts. */
export function splitHostPort(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(s.slice(i + 1)) };
}

/** A URL host part: IPv6 addresses in brackets. */
export function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * Resolves with the first SIGTERM or SIGINT. Holds the event loop open until then, so a
 * program whose parts happen to hold nothing open still runs until it is told to stop.
 * With `onRepeat`, the handlers stay: a later SIGTERM or SIGINT goes to it instead of
 * killing the process (a stop in progress is not cut short by a second signal).
 */
export function untilSignal(onRepeat?: (sig: NodeJS.Signals) => void): Promise<NodeJS.Signals> {
  const keepAlive = setInterval(() => {}, 1 << 30);
  let first: NodeJS.Signals | null = null;
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => () => {
      if (first !== null) return onRepeat?.(sig);
      first = sig;
      clearInterval(keepAlive);
      if (!onRepeat) {
        process.off("SIGTERM", term);
        process.off("SIGINT", int);
      }
      resolve(sig);
    };
    const term = on("SIGTERM");
    const int = on("SIGINT");
    process.on("SIGTERM", term);
    process.on("SIGINT", int);
  });
}
