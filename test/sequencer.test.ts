import { existsSync } from 'node:fs'
import { expect, it } from 'vitest'
import { durations } from './sequencer.js'

// test/durations.json orders the files (test/sequencer.ts): a file renamed or removed leaves a time
// that orders nothing, and a file it does not know starts first.
it('times only files that exist, each in its project', () => {
  const keys = Object.keys(durations)
  expect(keys.length).toBeGreaterThan(100)
  for (const key of keys) {
    const [project, file] = key.split(':') as [string, string]
    expect(existsSync(file), key).toBe(true)
    expect(project, key).toBe(file.endsWith('.isolated.test.ts') ? 'isolated' : 'shared')
    expect(durations[key], key).toBeGreaterThanOrEqual(0)
  }
})
