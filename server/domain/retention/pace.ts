// How fast a retention pass goes (issue 46; domain/retention/pass.ts): the share of the time it works,
// resting between batches, and how that share grows when the pass falls behind.

export interface PaceOptions {
  /** The share of the time the pass works, between 0 and 1 (PassOptions.duty). */
  duty?: number
  /** How often a pass still working may double its share (PassOptions.catchUpMs). */
  catchUpMs?: number
  /** Ends a rest at once. */
  signal?: AbortSignal
  /** Told each time the share doubles. */
  onDuty?: (duty: number) => void
}

/**
 * A pass's pace. Its duty is as asked, doubled for each catchUpMs the pass has been working while its
 * backlog grew. Of runs, the backlog is counted (executions past their window): one left from months
 * of runs (retention turned on late) shrinks batch by batch and keeps the duty asked, while runs
 * ending faster than the pass moves them grow it, and the duty doubles. Of other rows, where nothing
 * is counted, each catchUpMs in which its batches still moved rows doubles it.
 */
export class Pace {
  private duty: number
  private backlog: (() => Promise<number>) | undefined
  private period: { began: number; left?: number } = { began: performance.now() }

  constructor(private readonly options: PaceOptions) {
    this.duty = Math.min(1, Math.max(0.01, options.duty ?? 1))
  }

  /** The kind drained next, counted (runs) or not: the catch-up's period starts again with it. */
  counting(count: (() => Promise<number>) | undefined): void {
    this.backlog = count
    this.period = { began: performance.now() }
  }

  /**
   * A batch that began at `began` is done (and moved rows, or not): rests as long as the duty leaves
   * (ends on the signal).
   */
  async rest(began: number, moving: boolean): Promise<void> {
    const share = await this.dutyNow(moving)
    const signal = this.options.signal
    if (share >= 1 || signal?.aborted) return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ((performance.now() - began) * (1 - share)) / share)
      signal?.addEventListener('abort', done, { once: true })
      function done() {
        clearTimeout(timer)
        signal?.removeEventListener('abort', done)
        resolve()
      }
    })
  }

  private async dutyNow(moving: boolean): Promise<number> {
    const { catchUpMs } = this.options
    const periods = catchUpMs ? Math.floor((performance.now() - this.period.began) / catchUpMs) : 0
    if (periods > 0 && this.duty < 1) {
      // Doubled when the count grew since the last (a first count only sets the mark); of a kind not
      // counted, when its last batch moved rows. Rows that cannot move (a run at a gate for months)
      // neither count as growing nor as moving: walking past them is no reason to work harder.
      const left = await this.backlog?.()
      const last = this.period.left
      const behind = left === undefined ? moving : last !== undefined && left > last
      if (behind) {
        this.duty = Math.min(1, this.duty * 2 ** Math.min(periods, 10))
        this.options.onDuty?.(this.duty)
      }
      this.period = { began: performance.now(), left }
    } else if (this.backlog && this.period.left === undefined && catchUpMs) {
      // The first rest of a counted kind: the mark the next period's count is held to.
      this.period.left = await this.backlog()
    }
    return this.duty
  }
}
