import type { DiffLine } from '../../../shared/schemas/recommendations.js'

// A line diff (a recommendation's skill against its base version's): the longest common subsequence of
// the lines between the common head and tail, removals before additions where lines were replaced.

/** Past this many cells of the table, the middle is shown as all removed then all added. */
const maxCells = 4_000_000

export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split('\n')
  const b = after.split('\n')
  let head = 0
  while (head < a.length && head < b.length && a[head] === b[head]) head++
  let tail = 0
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++
  const x = a.slice(head, a.length - tail)
  const y = b.slice(head, b.length - tail)
  const same = (text: string): DiffLine => ({ kind: 'same', text })
  const middle: DiffLine[] = []
  if ((x.length + 1) * (y.length + 1) > maxCells) {
    middle.push(...x.map((text): DiffLine => ({ kind: 'removed', text })))
    middle.push(...y.map((text): DiffLine => ({ kind: 'added', text })))
  } else {
    // lcs[i][j]: the longest common subsequence of x[i..] and y[j..].
    const width = y.length + 1
    const lcs = new Uint32Array((x.length + 1) * width)
    for (let i = x.length - 1; i >= 0; i--)
      for (let j = y.length - 1; j >= 0; j--)
        lcs[i * width + j] =
          x[i] === y[j]
            ? lcs[(i + 1) * width + j + 1]! + 1
            : Math.max(lcs[(i + 1) * width + j]!, lcs[i * width + j + 1]!)
    let i = 0
    let j = 0
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) {
        middle.push(same(x[i]!))
        i++
        j++
      } else if (
        j >= y.length ||
        (i < x.length && lcs[(i + 1) * width + j]! >= lcs[i * width + j + 1]!)
      ) {
        middle.push({ kind: 'removed', text: x[i]! })
        i++
      } else {
        middle.push({ kind: 'added', text: y[j]! })
        j++
      }
    }
  }
  return [...a.slice(0, head).map(same), ...middle, ...a.slice(a.length - tail).map(same)]
}
