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
