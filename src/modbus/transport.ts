// One transport interface for Modbus TCP, RTU on a serial port, and RTU over TCP, all on
// modbus-serial. It speaks to one unit at a time and turns modbus-serial's errors into
// SitegateErrors with stable codes. Nothing above modbus/ sees framing.
import ModbusRTU from "modbus-serial";
import { SitegateError } from "../errors.js";
import { serialOpenOptions, type Endpoint, type SerialOpenOptions } from "./endpoint.js";
import type { Table } from "./planner.js";
import { AnswerWatch, type TcpPortIds } from "./tcp-answers.js";

export interface Transport {
  readonly isOpen: boolean;
  open(): Promise<void>;
  close(): Promise<void>;
  read(unit: number, table: Table, address: number, count: number, timeoutMs: number): Promise<number[]>;
  /** fn 6 for one register, fn 16 for several; fn 5 / 15 for coils. */
  writeRegisters(unit: number, address: number, values: number[], timeoutMs: number, fn?: 6 | 16): Promise<void>;
  writeCoils(unit: number, address: number, values: boolean[], timeoutMs: number): Promise<void>;
  /** Drops whatever was received and not taken as an answer (serial lines: a late answer). */
  discardInput?(): Promise<void>;
}

const EXCEPTIONS: Record<number, string> = {
  1: "illegal function",
  2: "illegal data address",
  3: "illegal data value",
  4: "slave device failure",
  5: "acknowledge",
  6: "slave device busy",
  10: "gateway path unavailable",
  11: "gateway target failed to respond",
};

/** The one value of a function 6 write: more or fewer would be written as something not asked for. */
function single(values: readonly number[], what: string): number {
  const [value] = values;
  if (value === undefined || values.length !== 1)
    throw new SitegateError("CONTROL_VALUE_INVALID", `${what}: function 6 writes one register, ${values.length} values were given`);
  return value;
}

export function mapModbusError(e: unknown, what: string): SitegateError {
  if (e instanceof SitegateError) return e;
  const err = e as { message?: string; modbusCode?: number; errno?: string; code?: string; name?: string };
  const msg = err?.message ?? String(e);
  if (typeof err?.modbusCode === "number") {
    const code = err.modbusCode;
    // 5 (acknowledge), 6 (busy) and 11 (gateway target did not answer) are worth retrying.
    return new SitegateError("MODBUS_EXCEPTION", `${what}: exception ${code} (${EXCEPTIONS[code] ?? "unknown"})`, {
      transient: code === 5 || code === 6 || code === 11,
      details: [{ path: "exception_code", message: String(code) }],
      cause: e,
    });
  }
  if (err?.errno === "ETIMEDOUT" || err?.name === "TransactionTimedOutError" || /timed out/i.test(msg)) {
    return new SitegateError("MODBUS_TIMEOUT", `${what}: no answer (timeout)`, { transient: true, cause: e });
  }
  if (/CRC/i.test(msg)) return new SitegateError("MODBUS_CRC", `${what}: bad CRC`, { transient: true, cause: e });
  if (
    /Port Not Open|ECONNREFUSED|ECONNRESET|EPIPE|EHOSTUNREACH|ENETUNREACH|ENOENT|EACCES|closed|socket/i.test(
      msg + (err?.code ?? "") + (err?.errno ?? ""),
    )
  ) {
    return new SitegateError("MODBUS_DISCONNECTED", `${what}: ${msg}`, { transient: true, cause: e });
  }
  return new SitegateError("MODBUS_BAD_RESPONSE", `${what}: ${msg}`, { transient: true, cause: e });
}

export class ModbusSerialTransport implements Transport {
  private client = new ModbusRTU.default();
  /** Set once open() succeeded, cleared by close(): a socket whose connect timed out is never "open". */
  private ready = false;
  /** Modbus TCP: how answers match their requests on this connection (null on serial lines). */
  private watch: AnswerWatch | null = null;
  /** Connections dropped because answers stopped matching (for tests and diagnostics). */
  dropped = 0;
  /** Frames discarded on this connection because their transaction id was not the request's (late answers). */
  get staleAnswers(): number {
    return this.watch?.stale ?? 0;
  }
  /** The options the serial port was last opened with (null before, or for TCP); tests read them. */
  openedWith: SerialOpenOptions | null = null;

  constructor(
    readonly endpoint: Endpoint,
    private readonly connectTimeoutMs = 3000,
  ) {}

  get isOpen(): boolean {
    return this.ready && this.client.isOpen;
  }

  async open(): Promise<void> {
    // A fresh client per connection: modbus-serial keeps per-port state we do not want to reuse.
    this.ready = false;
    this.watch = null;
    this.client = new ModbusRTU.default();
    this.client.setTimeout(this.connectTimeoutMs);
    const e = this.endpoint;
    const what = e.kind === "rtu" ? e.path : `${e.host}:${e.port}`;
    try {
      if (e.kind === "tcp") await this.client.connectTCP(e.host, { port: e.port, timeout: this.connectTimeoutMs } as never);
      // modbus-serial's "telnet" port is raw RTU frames over TCP (its "TcpRTUBuffered" speaks MBAP).
      else if (e.kind === "rtu-tcp") await this.client.connectTelnet(e.host, { port: e.port, timeout: this.connectTimeoutMs } as never);
      else {
        const options = serialOpenOptions(e);
        await this.client.connectRTUBuffered(e.path, { ...options });
        this.openedWith = options;
      }
      if (e.kind === "tcp") this.watch = new AnswerWatch((this.client as unknown as { _port: TcpPortIds })._port);
      this.ready = true;
    } catch (err) {
      // A connect that timed out goes on in the background; should it complete, modbus-serial
      // never listens to that socket (every answer would be lost). So it is destroyed now.
      const failed = this.client;
      failed.destroy(() => undefined);
      // The serial library says a port another process holds only in text: named here, at the boundary.
      const locked = e.kind === "rtu" && /cannot lock port/i.test((err as Error).message);
      throw new SitegateError("MODBUS_DISCONNECTED", `cannot open ${what}: ${(err as Error).message}`, {
        transient: true,
        cause: err,
        details: locked ? [{ path: "port_locked", message: e.path }] : [],
      });
    }
  }

  async discardInput(): Promise<void> {
    // modbus-serial's buffered RTU port keeps received bytes in `_buffer` and scans them for
    // the next answer; the serial port's own flush drops what the kernel still holds.
    const port = (this.client as unknown as { _port?: { _buffer?: Buffer; _client?: { flush(cb: () => void): void } } })._port;
    if (!port || this.endpoint.kind !== "rtu") return;
    await new Promise<void>((resolve) => (port._client ? port._client.flush(() => resolve()) : resolve()));
    port._buffer = Buffer.alloc(0);
  }

  async close(): Promise<void> {
    this.ready = false;
    this.watch = null;
    if (!this.client.isOpen) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 1000);
      this.client.close(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  async read(unit: number, table: Table, address: number, count: number, timeoutMs: number): Promise<number[]> {
    const c = this.client;
    c.setID(unit);
    c.setTimeout(timeoutMs);
    const what = `read unit ${unit} ${table} ${address}+${count}`;
    return this.exchange(what, async () => {
      switch (table) {
        case "holding":
          return (await c.readHoldingRegisters(address, count)).data;
        case "input":
          return (await c.readInputRegisters(address, count)).data;
        case "coil":
          return (await c.readCoils(address, count)).data.slice(0, count).map((b) => (b ? 1 : 0));
        case "discrete":
          return (await c.readDiscreteInputs(address, count)).data.slice(0, count).map((b) => (b ? 1 : 0));
      }
    });
  }

  /**
   * One request and its answer. On Modbus TCP, a timeout whose connection no longer matches
   * answers to requests (tcp-answers.ts) drops the connection: the bus opens a fresh one.
   */
  private async exchange<T>(what: string, request: () => Promise<T>): Promise<T> {
    const watch = this.watch;
    watch?.begin();
    try {
      const answer = await request();
      watch?.answered();
      return answer;
    } catch (e) {
      const err = mapModbusError(e, what);
      if (watch && err.code !== "MODBUS_TIMEOUT") watch.answered();
      if (watch && err.code === "MODBUS_TIMEOUT" && watch.timedOut() && watch === this.watch) {
        this.dropped++;
        await this.close();
      }
      throw err;
    }
  }

  async writeRegisters(
    unit: number,
    address: number,
    values: number[],
    timeoutMs: number,
    fn: 6 | 16 = values.length === 1 ? 6 : 16,
  ): Promise<void> {
    const c = this.client;
    c.setID(unit);
    c.setTimeout(timeoutMs);
    const what = `write unit ${unit} register ${address}`;
    const value = fn === 6 ? single(values, what) : 0;
    await this.exchange(what, async () => {
      if (fn === 6) await c.writeRegister(address, value);
      else await c.writeRegisters(address, values);
    });
  }

  async writeCoils(unit: number, address: number, values: boolean[], timeoutMs: number): Promise<void> {
    const c = this.client;
    c.setID(unit);
    c.setTimeout(timeoutMs);
    await this.exchange(`write unit ${unit} coil ${address}`, async () => {
      if (values.length === 1) await c.writeCoil(address, values[0]!); // the length was checked just now
      else await c.writeCoils(address, values);
    });
  }
}
