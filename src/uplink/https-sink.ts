// The HTTPS sink of the delivery core: a lane's message is POSTed to its URL with its
// Idempotency-Key, and the answer is classified once (http-sender.ts classify()) into
// what the lane does next.
import type { Attempt, LaneItem, Sink } from "../delivery/lane.js";
import { classify, type HttpSender } from "./http-sender.js";

export class HttpsSink implements Sink {
  constructor(private readonly sender: HttpSender) {}

  ready(): boolean {
    return true;
  }

  send(item: LaneItem, done: (a: Attempt) => void): void {
    this.sender.post(item.address, item.body, item.key).then(
      (r) => done({ outcome: classify(r), status: r.status, error: r.error, retryAfterMs: r.retryAfterMs, hint: "check partner.headers" }),
      (e: unknown) => done({ outcome: "transient", error: e instanceof Error ? e.message : String(e) }),
    );
  }
}
