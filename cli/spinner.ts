import { clearLine, type Output } from './output.js'

const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

/** A progress line on stderr: lines written through it go above the spinner, which stays last. */
export interface Spinner {
  /** What the spinner line says (the elapsed time is added to it). */
  update(text: string): void
  /** Writes a whole line to stderr above the spinner. */
  line(text: string): void
  /** Removes the spinner line. */
  stop(): void
}

/**
 * A spinner with the elapsed time, on stderr only when stderr is a terminal; otherwise lines are
 * written as they are and nothing else (a pipe or a CI log gets no control characters).
 */
export function startSpinner(out: Output, text: string, now: () => number = Date.now): Spinner {
  if (!out.errorIsTTY) {
    return { update: () => undefined, line: (t) => out.error(t + '\n'), stop: () => undefined }
  }
  const started = now()
  let current = text
  let frame = 0
  const clear = clearLine
  const draw = () =>
    out.error(`${clear}${frames[frame++ % frames.length]} ${current}  ${elapsed(now() - started)}`)
  const timer = setInterval(draw, 100)
  timer.unref()
  draw()
  return {
    update(next) {
      current = next
    },
    line(t) {
      out.error(`${clear}${t}\n`)
      draw()
    },
    stop() {
      clearInterval(timer)
      out.error(clear)
    },
  }
}

/** 9s, 2m05s, 1h02m. */
/** 0.4s, 12.0s, 2m05s: how long a run took. */
export function duration(ms: number): string {
  return ms < 60_000 ? `${(Math.max(0, ms) / 1000).toFixed(1)}s` : elapsed(ms)
}

export function elapsed(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`
}
