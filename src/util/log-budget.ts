// A budget of log lines for something a peer can make happen at will (a refused fleet
// command, a malformed Zigbee message): the first few lines of each window are written,
// the rest only counted, so a flood costs a counter increment rather than a journal line
// per message. The count of lines held back rides on the next line written.

export class LogBudget {
  private windowStart = Number.NEGATIVE_INFINITY;
  private used = 0;
  private held = 0;

  constructor(
    private readonly perWindow = 5,
    private readonly windowMs = 60_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** null: do not log this one. A number: log it, noting that many held back since the last line. */
  take(): number | null {
    const t = this.now();
    if (t - this.windowStart >= this.windowMs) {
      this.windowStart = t;
      this.used = 0;
    }
    if (this.used >= this.perWindow) {
      this.held++;
      return null;
    }
    this.used++;
    const held = this.held;
    this.held = 0;
    return held;
  }
}
