import { afterAll } from 'vitest'

// Clean-up that runs when the test file ends, wherever it is asked for. Vitest drops an `afterAll`
// registered inside a hook or a test: the helpers that make a database, a daemon or an engine are
// called from `beforeAll` as often as from a file's top, and their clean-up never ran. While every
// file had a process of its own, that process's exit hid it; the files now share their worker
// (vitest.config.ts `isolate: false`), and a pool left open is a pool the next file cannot have.

const pending: (() => unknown)[] = []

/** Runs `cleanUp` after the current test file, the last asked for first. */
export function afterFile(cleanUp: () => unknown): void {
  pending.push(cleanUp)
}

/**
 * What test/setup.ts registers for every file: its `afterAll` is the file's first, so it runs after the
 * file's own (vitest runs after-hooks last registered first). Every clean-up runs; the first failure
 * is thrown after all have.
 */
export function afterEachFile(): void {
  afterAll(async () => {
    const errors: unknown[] = []
    for (let cleanUp = pending.pop(); cleanUp; cleanUp = pending.pop()) {
      try {
        await cleanUp()
      } catch (err) {
        errors.push(err)
      }
    }
    if (errors.length) throw errors[0]
  })
}
