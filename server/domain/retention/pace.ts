// How fast a retention pass goes (issue 46; domain/retention/pass.ts): the share of the time it works,
// resting between batches, and how that share grows when the pass falls behind.

export interface PaceOptions {
  /**
   * The share of the time the pass works, between 0 and 1 (1, flat out, unless told): after each
   * batch it rests for as long again as that share leaves. The engines' background pass works a
   * tenth of the time (backgroundDuty): a backlog (retention turned on over months of runs) is moved
   * over minutes instead of taking the cores from the runs while it lasts (issue 46, bench:retention
   * pass, 100,000 runs: flat out took 45% off bench:runs's done/s, a quarter of the time 21%, a tenth
   * none measurable, moving 244 runs a second). `osd admin prune` goes flat out.
   */
  duty?: number
  /**
   * With a duty below 1: each time this long passes with the pass still working and its backlog of
   * runs grown (or, of other rows, its batches still moving some), its duty doubles, up to flat out.
   * The engines give 15 s at most: a pass that cannot keep up at its share (runs ending faster than it
   * moves them) catches up instead of letting the tables grow without end, while a backlog it works
   * through keeps the share asked.
   */
  catchUpMs?: number
  /** Stops the pass between batches, and a rest at once, once aborted (the engine stopping). */
  signal?: AbortSignal
  /** Told each time the catch-up doubles the duty (the engine logs it). */
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
