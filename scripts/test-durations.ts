import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

// Writes test/durations.json (test/sequencer.ts starts the longest files first by it) from the times
// vitest kept of its last run here (node_modules/.vite/vitest/*/results.json). Run it after a full
// `npm test` on two cores when files were added or their times changed much.

const cacheDir = 'node_modules/.vite/vitest'
const newest = readdirSync(cacheDir)
  .map((dir) => join(cacheDir, dir, 'results.json'))
  .filter((file) => statSync(file, { throwIfNoEntry: false }))
  .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0]
if (!newest) throw new Error(`no results of a run in ${cacheDir}: run npm test first`)
const { results } = JSON.parse(readFileSync(newest, 'utf8')) as {
  results: [string, { duration: number }][]
}
const durations = Object.fromEntries(
  results
    .map(([key, { duration }]) => [key, Math.round(duration / 100) * 100] as const)
    .sort(([a], [b]) => (a < b ? -1 : 1)),
)
writeFileSync('test/durations.json', JSON.stringify(durations, null, 2) + '\n')
console.log(`test/durations.json: ${results.length} files, from ${newest}`)
