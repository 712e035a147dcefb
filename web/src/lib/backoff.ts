// Reconnect delays: 1s, doubling, at most 30s, with a little jitter so many
// tabs do not reconnect in lockstep.
export class Backoff {
  private attempt = 0
  constructor(private initial = 1000, private max = 30000) {}
  next(): number {
    const d = Math.min(this.max, this.initial * 2 ** this.attempt)
    this.attempt++
    return Math.round(d * (0.85 + Math.random() * 0.3))
  }
  reset() {
    this.attempt = 0
  }
}
