// Modbus TCP answers are matched to their requests by the MBAP transaction id. modbus-serial
// does the matching (its `_transactions`, keyed by the id it wrote; an answer whose
// transaction timed out is dropped), but it only listens once its open succeeded: a socket
// whose connect timed out and then completed delivers every answer to nobody. This watch
// sees each frame's id on the socket and tells the transport when answers stop matching:
// the answer to the request that timed out did arrive (the library did not take it), or
// several requests in a row went unanswered. The transport then drops the connection and
// the bus opens a fresh one.
import type { EventEmitter } from "node:events";

/** modbus-serial's TcpPort as far as the watch reads it (ids of the last frame written and read). */
export interface TcpPortIds extends EventEmitter {
  _transactionIdWrite?: number;
  _transactionIdRead?: number;
}

/** Timeouts in a row on one connection after which it is dropped, answers or not. */
export const TIMEOUTS_BEFORE_REOPEN = 3;

export class AnswerWatch {
  private inFlight: number | null = null;
  private ownAnswerSeen = false;
  private timeoutsInRow = 0;
  /** Frames whose id was not the request in flight (late answers to timed-out requests), discarded. */
  stale = 0;

  constructor(private readonly port: TcpPortIds) {
    port.on("data", () => {
      if (this.inFlight !== null && port._transactionIdRead === this.inFlight) this.ownAnswerSeen = true;
      else this.stale++;
    });
  }

  /** Before a request is written: the id modbus-serial gives it. */
  begin(): void {
    this.inFlight = this.port._transactionIdWrite ?? null;
    this.ownAnswerSeen = false;
  }

  /** The request was answered (or refused by the device): the connection works. */
  answered(): void {
    this.inFlight = null;
    this.timeoutsInRow = 0;
  }

  /** The request timed out. True when the connection no longer matches answers and must be reopened. */
  timedOut(): boolean {
    this.inFlight = null;
    this.timeoutsInRow++;
    return this.ownAnswerSeen || this.timeoutsInRow >= TIMEOUTS_BEFORE_REOPEN;
  }
}
