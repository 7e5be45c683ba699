// One physical bus (a serial line or one TCP endpoint): owns the transport and the only
// queue of requests to it, because RS-485 is half-duplex with one master and most TCP
// devices answer one request at a time. Control writes go before pairing, pairing before
// polling, polling before scan probes (a scan of a polled bus only fills the gaps, so the
// configured devices keep their samples); a per-bus gap and per-device delays space the
// requests; a lost connection is reopened with backoff, and a fresh one is left quiet as
// long as its slowest unit asks (connect_delay_ms). A unit that times out has its queued
// polls skipped, so a slow device costs the others one timeout. Reads of a transient
// failure (not a timeout) are retried once.
// A serial bus can be reframed (new baud, parity or stop bits): the port is closed and
// reopened with the new settings between two requests, and its silences follow.
import { setTimeout as sleep } from "node:timers/promises";
import { SitegateError } from "../errors.js";
import type { Logger } from "../log.js";
import { endpointKey, lineTiming, sameFraming, type Endpoint, type LineTiming } from "./endpoint.js";
import type { Table } from "./planner.js";
import { ModbusSerialTransport, mapModbusError, type Transport } from "./transport.js";

export const PRIORITY = { control: 0, pairing: 1, poll: 2, scan: 3 } as const;
export type Priority = (typeof PRIORITY)[keyof typeof PRIORITY];

/** The least time a serial line is left to answer late after a timeout. */
const LATE_ANSWER_MIN_MS = 20;

interface Job {
  unit: number;
  priority: Priority;
  run: (t: Transport) => Promise<unknown>;
  retries: number;
  /** how long the request waits for its answer */
  timeoutMs: number;
  /** the quiet after a connect this request needs beyond the units' own (an identity probe's profile) */
  connectDelayMs: number;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export interface BusStats {
  requests: number;
  failures: number;
  timeouts: number;
  reconnects: number;
  queued: number;
  busy_ms: number;
}

const MAX_QUEUE = 10_000;
const RECONNECT_MIN_MS = 1000;
const RECONNECT_MAX_MS = 30_000;

export class Bus {
  readonly key: string;
  readonly stats: BusStats = { requests: 0, failures: 0, timeouts: 0, reconnects: 0, queued: 0, busy_ms: 0 };
  /** One queue per Priority (0..3), so that a priority always names its queue. */
  private readonly queues: [Job[], Job[], Job[], Job[]] = [[], [], [], []];
  private readonly deviceDelay = new Map<number, number>();
  private readonly connectDelay = new Map<number, number>();
  /** When the present connection was opened (performance.now()). */
  private connectedAt = 0;
  private readonly lastEnd = new Map<number, number>();
  private lastAnyEnd = 0;
  private running = false;
  private wakeTimer: NodeJS.Timeout | null = null;
  private nextConnectAt = 0;
  private reconnectDelay = RECONNECT_MIN_MS;
  private closed = false;
  private current: Endpoint;
  private line: LineTiming | null;
  private conn: Transport;
  private readonly makeTransport: (e: Endpoint) => Transport;
  /** Set by reframe(): the transport is replaced before the next request. */
  private reopenWanted = false;

  constructor(
    endpoint: Endpoint,
    /** Carries the bus key as `bus` (the engine gives each bus a child logger): no log line repeats it. */
    private readonly log: Logger,
    /** A transport, or how to make one for a framing (the bus reframes through it). */
    transport: Transport | ((e: Endpoint) => Transport) = (e) => new ModbusSerialTransport(e),
  ) {
    this.key = endpointKey(endpoint);
    this.current = endpoint;
    this.line = endpoint.kind === "rtu" ? lineTiming(endpoint) : null;
    this.makeTransport = typeof transport === "function" ? transport : () => transport;
    this.conn = this.makeTransport(endpoint);
  }

  /** Where the bus is and, on a serial line, its present framing. */
  get endpoint(): Endpoint {
    return this.current;
  }

  /** The transport in use (its open options, for tests and diagnostics). */
  get transport(): Transport {
    return this.conn;
  }

  /** Wire timing of a serial line (null over TCP). */
  get timing(): LineTiming | null {
    return this.line;
  }

  /** Silence kept after every request: 3.5 characters on a serial line (1.75 ms above 19200 baud). */
  get gapMs(): number {
    return this.line?.silenceMs ?? 0;
  }

  /**
   * Changes the line settings of this bus (same path, other baud, parity or stop bits):
   * the port is closed and reopened with them before the next request. False when
   * nothing changes.
   */
  reframe(endpoint: Endpoint): boolean {
    if (endpointKey(endpoint) !== this.key) throw new SitegateError("INTERNAL", `bus ${this.key} cannot become ${endpointKey(endpoint)}`);
    if (sameFraming(endpoint, this.current)) return false;
    this.log.info({ from: describeFraming(this.current), to: describeFraming(endpoint) }, "line settings change; the port is reopened");
    this.current = endpoint;
    this.line = endpoint.kind === "rtu" ? lineTiming(endpoint) : null;
    this.reopenWanted = true;
    return true;
  }

  /**
   * Minimum time between the end of one request to this unit and the next (slow devices
   * want 25-50 ms), and the quiet after a connect before the first request on it (a Huawei
   * SDongle wants 1 s; the longest of the bus's units holds).
   */
  setDeviceDelay(unit: number, ms: number, connectDelayMs = 0): void {
    if (ms > 0) this.deviceDelay.set(unit, ms);
    else this.deviceDelay.delete(unit);
    if (connectDelayMs > 0) this.connectDelay.set(unit, connectDelayMs);
    else this.connectDelay.delete(unit);
  }

  read(
    unit: number,
    table: Table,
    address: number,
    count: number,
    opts: { priority?: Priority; timeoutMs?: number; retries?: number; connectDelayMs?: number } = {},
  ): Promise<number[]> {
    const timeout = opts.timeoutMs ?? 1000;
    return this.enqueue(
      unit,
      opts.priority ?? PRIORITY.poll,
      opts.retries ?? 1,
      timeout,
      (t) => t.read(unit, table, address, count, timeout),
      opts.connectDelayMs,
    ) as Promise<number[]>;
  }

  writeRegisters(
    unit: number,
    address: number,
    values: number[],
    opts: { priority?: Priority; timeoutMs?: number; fn?: 6 | 16 } = {},
  ): Promise<void> {
    const timeout = opts.timeoutMs ?? 1000;
    return this.enqueue(unit, opts.priority ?? PRIORITY.control, 0, timeout, (t) =>
      t.writeRegisters(unit, address, values, timeout, opts.fn),
    ) as Promise<void>;
  }

  writeCoils(unit: number, address: number, values: boolean[], opts: { priority?: Priority; timeoutMs?: number } = {}): Promise<void> {
    const timeout = opts.timeoutMs ?? 1000;
    return this.enqueue(unit, opts.priority ?? PRIORITY.control, 0, timeout, (t) =>
      t.writeCoils(unit, address, values, timeout),
    ) as Promise<void>;
  }

  /** True while a request is on the wire (for the watchdog's stuck-bus check). */
  get busy(): boolean {
    return this.running;
  }

  /** Requests waiting, all priorities. */
  get queued(): number {
    return this.queues.reduce((n, q) => n + q.length, 0);
  }

  private enqueue(
    unit: number,
    priority: Priority,
    retries: number,
    timeoutMs: number,
    run: (t: Transport) => Promise<unknown>,
    connectDelayMs = 0,
  ): Promise<unknown> {
    if (this.closed) return Promise.reject(new SitegateError("MODBUS_DISCONNECTED", `bus ${this.key} is closed`));
    if (this.queued >= MAX_QUEUE)
      return Promise.reject(new SitegateError("MODBUS_DISCONNECTED", `bus ${this.key} queue is full`, { transient: true }));
    return new Promise((resolve, reject) => {
      this.queues[priority].push({ unit, priority, run, retries, timeoutMs, connectDelayMs, resolve, reject });
      this.stats.queued = this.queued;
      this.pump();
    });
  }

  /** The next job whose device is ready, by priority; or how long until one is. */
  private pick(now: number): { job: Job } | { waitMs: number } | null {
    let wait = Infinity;
    for (const q of this.queues) {
      for (const [i, job] of q.entries()) {
        const ready = Math.max(this.lastAnyEnd + this.gapMs, (this.lastEnd.get(job.unit) ?? 0) + (this.deviceDelay.get(job.unit) ?? 0));
        // The silence counts from when the answer was parsed, which is after its last byte
        // arrived; less than a millisecond to go (the timer resolution) is not waited.
        if (ready - now < 1) {
          q.splice(i, 1);
          return { job };
        }
        wait = Math.min(wait, ready - now);
      }
    }
    return wait === Infinity ? null : { waitMs: wait };
  }

  private pump(): void {
    if (this.running || this.closed) return;
    const next = this.pick(performance.now());
    if (!next) return;
    if ("waitMs" in next) {
      // Timers have millisecond resolution and fire late rather than early: wait the whole
      // milliseconds and let the next pass take the job once less than one is left.
      if (!this.wakeTimer) {
        this.wakeTimer = setTimeout(
          () => {
            this.wakeTimer = null;
            this.pump();
          },
          Math.max(1, Math.floor(next.waitMs)),
        );
      }
      return;
    }
    this.running = true;
    void this.execute(next.job).finally(() => {
      this.running = false;
      this.stats.queued = this.queued;
      this.pump();
    });
  }

  private async ensureOpen(): Promise<void> {
    if (this.reopenWanted) {
      this.reopenWanted = false;
      await this.conn.close();
      this.conn = this.makeTransport(this.current);
      this.nextConnectAt = 0;
      this.reconnectDelay = RECONNECT_MIN_MS;
    }
    if (this.conn.isOpen) return;
    const now = Date.now();
    if (now < this.nextConnectAt) {
      throw new SitegateError("MODBUS_DISCONNECTED", `${this.key} is not connected; next attempt in ${this.nextConnectAt - now} ms`, {
        transient: true,
      });
    }
    try {
      await this.conn.open();
      this.connectedAt = performance.now();
      this.stats.reconnects++;
      this.reconnectDelay = RECONNECT_MIN_MS;
      this.nextConnectAt = 0;
      this.log.debug("connected");
    } catch (e) {
      this.nextConnectAt = Date.now() + this.reconnectDelay;
      this.log.warn({ retry_in_ms: this.reconnectDelay, err: (e as Error).message }, "cannot connect");
      this.reconnectDelay = Math.min(RECONNECT_MAX_MS, this.reconnectDelay * 2);
      throw mapModbusError(e, `connect ${this.key}`);
    }
  }

  private async execute(job: Job): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const start = performance.now();
      try {
        await this.ensureOpen();
        // The connection is the device's (a dongle, a GX): the quiet after a connect holds for
        // every unit on it, as long as the slowest of them wants.
        // A timer may fire a fraction of a millisecond early: wait again until the quiet is over.
        const quietEnd = this.connectedAt + Math.max(job.connectDelayMs, ...this.connectDelay.values());
        while (quietEnd - performance.now() > 0) await sleep(Math.ceil(quietEnd - performance.now()));
        this.stats.requests++;
        const v = await job.run(this.conn);
        this.finish(job.unit, start);
        job.resolve(v);
        return;
      } catch (e) {
        this.finish(job.unit, start);
        const err = mapModbusError(e, `${this.key} unit ${job.unit}`);
        this.stats.failures++;
        if (err.code === "MODBUS_TIMEOUT") {
          this.stats.timeouts++;
          this.skipQueuedPolls(job.unit);
          // RTU frames carry no transaction id: a late answer arriving while the next request
          // waits would be taken for that request's answer. So the line is given as long again
          // as the request waited, and whatever arrived meanwhile is thrown away.
          if (this.endpoint.kind === "rtu") {
            await sleep(Math.max(LATE_ANSWER_MIN_MS, job.timeoutMs));
            await this.conn.discardInput?.();
          }
        }
        if (err.code === "MODBUS_DISCONNECTED" && this.conn.isOpen) await this.conn.close();
        // A dropped TCP peer is reopened at once on the retry; after that, with backoff.
        const retryable =
          err.transient && err.code !== "MODBUS_TIMEOUT" && !(err.code === "MODBUS_DISCONNECTED" && Date.now() < this.nextConnectAt);
        if (attempt < job.retries && retryable && !this.closed) continue;
        job.reject(err);
        return;
      }
    }
  }

  /**
   * A unit that did not answer keeps the bus for its whole timeout (up to 10 s for a
   * Huawei): its polls and scan probes queued meanwhile are skipped, not sent, so one
   * silence costs the others on the bus one timeout, not one per queued request.
   * Control and pairing requests of the unit stay queued.
   */
  private skipQueuedPolls(unit: number): void {
    for (const priority of [PRIORITY.poll, PRIORITY.scan]) {
      const q = this.queues[priority];
      for (let i = q.length - 1; i >= 0; i--) {
        const job = q[i]!; // i runs over q's own indices
        if (job.unit !== unit) continue;
        q.splice(i, 1);
        job.reject(
          new SitegateError("MODBUS_TIMEOUT", `${this.key} unit ${unit}: skipped, the unit did not answer its last request`, {
            transient: true,
          }),
        );
      }
    }
    this.stats.queued = this.queued;
  }

  private finish(unit: number, start: number): void {
    const end = performance.now();
    this.stats.busy_ms += end - start;
    this.lastEnd.set(unit, end);
    this.lastAnyEnd = end;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    for (const q of this.queues) {
      for (const j of q.splice(0)) j.reject(new SitegateError("MODBUS_DISCONNECTED", `bus ${this.key} is closed`));
    }
    while (this.running) await sleep(5);
    await this.conn.close();
  }
}

function describeFraming(e: Endpoint): string {
  return e.kind === "rtu" ? `${e.baud} 8${e.parity.charAt(0).toUpperCase()}${e.stopBits}` : e.kind;
}

/** Every bus of the gateway by key; devices hold (bus, unit) handles, never a socket. */
export class BusManager {
  private readonly buses = new Map<string, Bus>();
  constructor(private readonly log: Logger) {}

  /**
   * The bus of this endpoint, made on first use. A serial endpoint with other line
   * settings than the bus has reframes it: the configure flow makes sure that the
   * devices of one port agree on them.
   */
  get(endpoint: Endpoint): Bus {
    const key = endpointKey(endpoint);
    let bus = this.buses.get(key);
    if (!bus) {
      bus = new Bus(endpoint, this.log.child({ bus: key }));
      this.buses.set(key, bus);
    } else {
      bus.reframe(endpoint);
    }
    return bus;
  }

  find(key: string): Bus | undefined {
    return this.buses.get(key);
  }

  all(): Bus[] {
    return [...this.buses.values()];
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.all().map((b) => b.close()));
    this.buses.clear();
  }
}
