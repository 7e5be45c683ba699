// The product's one test seam for GPIO (`gpio.backend: sim`, `chip` = the simulator's control
// URL): a small HTTP client of the simulator's documented API (docs/simulator.md), not a
// model of the chip; the simulator itself is its own package (sitegate-sim). Outputs are
// driven with POST /gpio/<line>/output, inputs watched on the server-sent events of
// GET /gpio/events (a snapshot, then every edge). A lost stream is opened again after a
// second, and its snapshot gives the levels again.
import { SitegateError, errorMessage } from "../errors.js";
import type { ChipBackend, InputWatcher, Level } from "./backend.js";

const RECONNECT_MS = 1000;

export class SimChip implements ChipBackend {
  private abort: AbortController | null = null;
  private stopped = false;

  constructor(private readonly url: string) {}

  private async call(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
    let res: Response;
    try {
      res = await fetch(this.url.replace(/\/$/, "") + path, {
        method,
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: { "content-type": "application/json" },
        signal: AbortSignal.timeout(5000),
      });
    } catch (e) {
      throw new SitegateError("DEVICE_OFFLINE", `gpio chip ${this.url} cannot be reached: ${errorMessage(e)}`, { transient: true });
    }
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (!res.ok) throw new SitegateError("DEVICE_NOT_FOUND", `gpio chip ${method} ${path}: ${res.status} ${String(json.error ?? "")}`);
    return json;
  }

  async readOutput(line: number): Promise<Level> {
    return (await this.call("GET", `/gpio/${line}`)).value === 1 ? 1 : 0;
  }

  async writeOutput(line: number, value: Level): Promise<void> {
    const r = await this.call("POST", `/gpio/${line}/output`, { value });
    if (r.value !== value)
      throw new SitegateError("DEVICE_TIMEOUT", `gpio line ${line} reads ${String(r.value)} after it was driven to ${value}`);
  }

  async watch(inputs: readonly number[], to: InputWatcher): Promise<void> {
    if (inputs.length === 0) return;
    const loop = async () => {
      while (!this.stopped) {
        this.abort = new AbortController();
        try {
          const res = await fetch(`${this.url.replace(/\/$/, "")}/gpio/events?lines=${inputs.join(",")}`, {
            signal: this.abort.signal,
            headers: { accept: "text/event-stream" },
          });
          if (!res.ok || !res.body) throw new SitegateError("DEVICE_OFFLINE", `GET /gpio/events: ${res.status}`, { transient: true });
          await this.read(res.body, inputs, to);
          throw new SitegateError("DEVICE_OFFLINE", "the event stream ended", { transient: true });
        } catch (e) {
          if (this.stopped) return;
          to.connected(false, errorMessage(e));
          await new Promise((r) => setTimeout(r, RECONNECT_MS));
        }
      }
    };
    void loop();
  }

  /** Parses the event stream: `event:` and `data:` lines, a blank line ends one event. */
  private async read(body: ReadableStream<Uint8Array>, inputs: readonly number[], to: InputWatcher): Promise<void> {
    const decoder = new TextDecoder();
    let buf = "";
    let event = "message";
    let data = "";
    for await (const chunk of body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (data) this.dispatch(event, data, inputs, to);
          event = "message";
          data = "";
        } else if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
    }
  }

  private dispatch(event: string, data: string, inputs: readonly number[], to: InputWatcher): void {
    const j = JSON.parse(data) as { lines?: Record<string, number>; line?: number; value?: number };
    if (event === "snapshot" && j.lines) {
      to.connected(true);
      for (const l of inputs) if (j.lines[String(l)] !== undefined) to.level(l, j.lines[String(l)] === 1 ? 1 : 0);
    } else if (event === "edge" && typeof j.line === "number" && inputs.includes(j.line)) {
      to.level(j.line, j.value === 1 ? 1 : 0);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort?.abort();
  }
}
