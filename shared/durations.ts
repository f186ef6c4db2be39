// ISO 8601 durations, as retention windows are written (issue 46): `P90D`, `PT1M`, `P1Y2M`, `P2W`.
// Whole numbers only, upper case, at least one part, `T` only before an hour, minute or second part:
// PostgreSQL reads the same text as an interval, so what the API stores is what the pass computes with.

const pattern =
  /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/

/** The longest window: a hundred years (a longer one is better said with null, kept for ever). */
export const maxDurationSeconds = 100 * 366 * 86_400

/**
 * The length of an ISO 8601 duration in seconds (a year as 365.25 days, a month as 30.44), or
 * undefined when `text` is not one: for checking a window, not for computing with it.
 */
export function durationSeconds(text: string): number | undefined {
  const match = pattern.exec(text)
  if (!match || text === 'P' || text.endsWith('T')) return undefined
  const [, y, mo, w, d, h, mi, s] = match.map((part) => (part === undefined ? 0 : Number(part)))
  return y! * 31_557_600 + mo! * 2_629_800 + w! * 604_800 + d! * 86_400 + h! * 3_600 + mi! * 60 + s!
}

/** Why `text` is not a window (a duration from a second to a hundred years), or undefined when it is. */
export function durationProblem(text: string): string | undefined {
  const seconds = durationSeconds(text)
  if (seconds === undefined)
    return `an ISO 8601 duration of whole numbers such as P90D, PT1M or P1Y2M, or null for ever; got "${text}"`
  if (seconds <= 0) return `a window longer than zero; got "${text}"`
  if (seconds > maxDurationSeconds)
    return `at most a hundred years (null keeps for ever); got "${text}"`
  return undefined
}
