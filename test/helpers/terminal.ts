import { EventEmitter } from 'node:events'

/**
 * A terminal for an ink screen run in-process (100 x 40): stdout keeps what was drawn in `output`,
 * `press(key)` types on stdin as a person would.
 */
export function fakeTerminal() {
  const screen = new VirtualScreen(100, 40)
  const stdout = Object.assign(new EventEmitter(), {
    isTTY: true,
    columns: 100,
    rows: 40,
    output: '',
    write(chunk: string) {
      stdout.output += chunk
      screen.write(chunk)
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
    /** What the terminal shows, scrollback first: its rows as drawn, trailing blank rows left out. */
    screen: () => screen.text(),
    /** The window resized by the person: the terminal cuts its rows, then tells the program. */
    resize(columns: number, rows: number) {
      screen.resize(columns, rows)
      stdout.columns = columns
      stdout.rows = rows
      stdout.emit('resize')
    },
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

/**
 * A terminal's rows, scrollback included, as the bytes a program writes leave them: enough of a VT100
 * for ink's drawing (text that wraps at the width, CR, LF taken as a tty's CR LF, cursor up, down and
 * to a column, erase in line and in display, home; other sequences ignored). A resize cuts each row to
 * the new width and keeps the cursor, as xterm does; terminals that rewrap instead leave even more of
 * an old frame behind, so a screen clean here is clean there.
 */
export class VirtualScreen {
  private rows: string[][] = [[]]
  private row = 0
  private col = 0

  constructor(
    private columns: number,
    private height: number,
  ) {}

  /** The first row of the visible screen. */
  private get top(): number {
    return Math.max(0, this.rows.length - this.height)
  }

  private lineFeed(): void {
    this.row++
    while (this.rows.length <= this.row) this.rows.push([])
  }

  write(data: string): void {
    const tokens = /\x1b\[([?0-9;]*)([A-Za-z])|\x1b\][^\x07]*\x07|\x1b[78=>]|([\s\S])/gu
    for (const [, params, final, char] of data.matchAll(tokens)) {
      if (final) this.control(params ?? '', final)
      else if (char === '\n') {
        this.lineFeed()
        this.col = 0
      } else if (char === '\r') this.col = 0
      else if (char !== undefined && char >= ' ') {
        if (this.col >= this.columns) {
          this.lineFeed()
          this.col = 0
        }
        const line = this.rows[this.row]!
        while (line.length < this.col) line.push(' ')
        line[this.col++] = char
      }
    }
  }

  private control(params: string, final: string): void {
    if (params.startsWith('?')) return
    const n = Number(params.split(';')[0] || 0)
    const line = this.rows[this.row]!
    switch (final) {
      case 'A':
        this.row = Math.max(this.top, this.row - Math.max(1, n))
        return
      case 'B':
        for (let i = 0; i < Math.max(1, n); i++) this.lineFeed()
        return
      case 'G':
        this.col = Math.max(0, n - 1)
        return
      case 'H':
        this.row = this.top
        this.col = 0
        return
      case 'K':
        if (n === 2) this.rows[this.row] = []
        else if (n === 0) line.length = Math.min(line.length, this.col)
        return
      case 'J':
        if (n === 2) for (let r = this.top; r < this.rows.length; r++) this.rows[r] = []
        else if (n === 3) {
          const gone = this.top
          this.rows.splice(0, gone)
          this.row -= gone
        } else if (n === 0) {
          line.length = Math.min(line.length, this.col)
          for (let r = this.row + 1; r < this.rows.length; r++) this.rows[r] = []
        }
        return
    }
  }

  resize(columns: number, height: number): void {
    this.columns = columns
    this.height = height
    for (const line of this.rows) line.length = Math.min(line.length, columns)
    this.col = Math.min(this.col, columns)
  }

  text(): string {
    const lines = this.rows.map((l) => l.join('').trimEnd())
    while (lines.length && !lines.at(-1)) lines.pop()
    return lines.join('\n')
  }
}
