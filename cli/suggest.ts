// "Did you mean" for names osctl looks up (a task's slug, a member's name, a profile; issue 51), by the
// rule commander applies to a mistyped command (commander's lib/suggestSimilar.js, not exported): the
// candidates at the smallest edit distance, at most 3 edits, and more alike than not (over 40%).

const maxDistance = 3
const minSimilarity = 0.4

/** Optimal string alignment distance (Damerau-Levenshtein, no substring edited twice). */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > maxDistance) return Math.max(a.length, b.length)
  const d: number[][] = []
  for (let i = 0; i <= a.length; i++) d[i] = [i]
  for (let j = 0; j <= b.length; j++) d[0]![j] = j
  for (let j = 1; j <= b.length; j++)
    for (let i = 1; i <= a.length; i++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1)
    }
  return d[a.length]![b.length]!
}

/** The candidates closest to `word`, sorted; none when nothing is close. Compared without case. */
export function similar(word: string, candidates: Iterable<string>): string[] {
  let best: string[] = []
  let bestDistance = maxDistance
  const lower = word.toLowerCase()
  for (const candidate of new Set(candidates)) {
    if (candidate.length <= 1) continue
    const distance = editDistance(lower, candidate.toLowerCase())
    const length = Math.max(word.length, candidate.length)
    if ((length - distance) / length <= minSimilarity) continue
    if (distance < bestDistance) {
      bestDistance = distance
      best = [candidate]
    } else if (distance === bestDistance) best.push(candidate)
  }
  return best.sort((a, b) => a.localeCompare(b))
}

/** ` (did you mean "x"?)`, ` (did you mean one of "x", "y"?)`, or nothing: as commander's, on one line. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const found = similar(word, candidates).map((name) => `"${name}"`)
  if (found.length === 0) return ''
  return found.length === 1
    ? ` (did you mean ${found[0]}?)`
    : ` (did you mean one of ${found.join(', ')}?)`
}
