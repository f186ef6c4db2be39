import { EventEmitter } from 'node:events'

/**
 * A terminal for an ink screen run in-process (100 x 40): stdout keeps what was drawn in `output`,
 * `press(key)` types on stdin as a person would.
 */
export function fakeTerminal() {
  const stdout = Object.assign(new EventEmitter(), {
    isTTY: true,
    columns: 100,
    rows: 40,
    output: '',
    write(chunk: string) {
      stdout.output += chunk
      return true
    },
  })
  const stdin = Object.assign(new EventEmitter(), {
    isTTY: true,
    queued: null as string | null,
    setEncoding() {},
    setRawMode() {},
    ref() {},
    unref() {},
    resume() {},
    pause() {},
    read: () => {
      const chunk = stdin.queued
      stdin.queued = null
      return chunk
    },
  })
  return {
    stdin: stdin as unknown as NodeJS.ReadStream,
    stdout: stdout as unknown as NodeJS.WriteStream,
    output: () => stdout.output,
    press(key: string) {
      stdin.queued = key
      stdin.emit('readable')
    },
  }
}

/**
 * Types keys on an ink screen rendered by ink-testing-library, one write each as a person types, and
 * after each waits until the screen has drawn what the key did: until the event loop has gone round
 * ten times with no new frame, and at least `minMs` has passed. React renders in slices queued with
 * setImmediate, so counting rounds rather than milliseconds holds on a loaded machine, where a render
 * outlasted a fixed 15 ms wait (issue 40).
 */
export async function typeKeys(
  ui: { stdin: { write(data: string): void }; frames: readonly string[] },
  keys: readonly string[],
  minMs = 15,
): Promise<void> {
  for (const key of keys) {
    ui.stdin.write(key)
    const started = Date.now()
    let seen = ui.frames.length
    let quiet = 0
    while (quiet < 10 || Date.now() - started < minMs) {
      await new Promise((resolve) => setImmediate(resolve))
      if (ui.frames.length !== seen) {
        seen = ui.frames.length
        quiet = 0
      } else quiet++
      if (quiet >= 10 && Date.now() - started < minMs)
        await new Promise((resolve) => setTimeout(resolve, 1))
    }
  }
}
