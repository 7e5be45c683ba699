// The one cursor policy of every lane. Units (a message of the log, a snapshot of the
// sample store) are handed out in order, several at a time, and settled in whatever order
// their answers come; the durable cursor moves only over the contiguous prefix of settled
// units. A crash therefore sends again, with the same keys, what was not settled, and never
// skips it. A unit may travel in several parts (a snapshot split into payloads): it is
// settled when all of them are.

interface Open {
  id: number;
  parts: number;
  settled: number;
}

export class SettleOrder {
  /** Units handed out and not yet passed by the cursor, oldest first (from `head`). */
  private open: Open[] = [];
  private head = 0;
  private readonly byId = new Map<number, Open>();

  /** `advance(through)`: every unit through `through` is settled; the caller moves its cursor. */
  constructor(private readonly advance: (through: number) => void) {}

  /** Units handed out and not yet passed by the cursor. */
  get size(): number {
    return this.open.length - this.head;
  }

  /** A unit goes out in `parts` parts (0: nothing to send; it settles with the ones before it). */
  handOut(id: number, parts = 1): void {
    const entry = { id, parts, settled: 0 };
    this.open.push(entry);
    this.byId.set(id, entry);
    if (parts === 0) this.move();
  }

  /** One part of unit `id` is settled (accepted, or dead-lettered: either way it is off the lane). */
  settle(id: number): void {
    const entry = this.byId.get(id);
    if (!entry) return;
    entry.settled++;
    this.move();
  }

  /** Units through `through` are gone without being sent (dropped by the store's size bound). */
  drop(through: number): void {
    while (this.head < this.open.length && this.open[this.head]!.id <= through) this.byId.delete(this.open[this.head++]!.id);
    this.compact();
  }

  private move(): void {
    let through: number | null = null;
    while (this.head < this.open.length) {
      const first = this.open[this.head]!;
      if (first.settled < first.parts) break;
      through = first.id;
      this.byId.delete(first.id);
      this.head++;
    }
    this.compact();
    if (through !== null) this.advance(through);
  }

  /** Shifting one element per settle costs O(n) under --jitless; the consumed prefix goes in one splice. */
  private compact(): void {
    if (this.head > 64 && this.head * 2 > this.open.length) {
      this.open.splice(0, this.head);
      this.head = 0;
    }
  }
}
