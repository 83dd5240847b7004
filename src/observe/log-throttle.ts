/**
 * One log line per interval for events that can come once per request (a
 * store outage, a missing limit key under a flood of bad tokens, a full store):
 * the first event logs at once, later ones are counted and reported with the
 * next line, so a flood costs a line per second, not a line per request.
 */
export class LogThrottle {
  private last = -Infinity
  private count = 0

  constructor(
    private readonly clock: () => number,
    private readonly intervalMs = 1000,
  ) {}

  /** Counts one event; returns how many events the line now due covers, or 0 when no line is due. */
  hit(): number {
    this.count++
    const now = this.clock()
    if (now - this.last < this.intervalMs) return 0
    this.last = now
    const n = this.count
    this.count = 0
    return n
  }
}
