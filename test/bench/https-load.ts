// One closed-loop HTTPS load generator for the API benchmarks: `clients` requests in
// flight, each answer read and checked, requests/s over `ms`.
import { Agent, request } from "undici";
import { testCert } from "../support/tls.js";

export async function httpsLoad(
  url: string,
  opts: {
    ms: number;
    clients?: number;
    headers?: Record<string, string>;
    method?: "GET" | "POST";
    body?: () => string;
    check?: (status: number, text: string) => void;
  },
): Promise<number> {
  const clients = opts.clients ?? 4;
  const agent = new Agent({ connect: { ca: testCert().cert }, connections: clients, pipelining: 1 });
  const headers = { ...(opts.headers ?? {}), ...(opts.body ? { "content-type": "application/json" } : {}) };
  const check =
    opts.check ??
    ((status) => {
      if (status !== 200) throw new Error(`HTTP ${status}`);
    });
  let n = 0;
  const end = performance.now() + opts.ms;
  const t0 = performance.now();
  try {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (performance.now() < end) {
          const r = await request(url, { method: opts.method ?? "GET", body: opts.body?.(), headers, dispatcher: agent });
          check(r.statusCode, await r.body.text());
          n++;
        }
      }),
    );
  } finally {
    await agent.close();
  }
  return (n * 1000) / (performance.now() - t0);
}
