/**
 * A reader of a text/event-stream answer for tests: every event as it comes (name, parsed data, id,
 * the time it arrived), comments too, and whether the stream ended.
 */
export interface SseEvent {
  event: string
  data: any
  id?: string
  comment?: string
  at: number
}

export class SseReader {
  readonly events: SseEvent[] = []
  ended = false
  private waiters = new Set<() => void>()
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>

  constructor(readonly response: Response) {
    this.reader = response.body!.getReader()
    void this.pump()
  }

  private async pump(): Promise<void> {
    const decoder = new TextDecoder()
    let pending = ''
    try {
      for (;;) {
        const { done, value } = await this.reader.read()
        if (done) break
        pending += decoder.decode(value, { stream: true })
        let end: number
        while ((end = pending.indexOf('\n\n')) !== -1) {
          const frame = pending.slice(0, end)
          pending = pending.slice(end + 2)
          this.events.push(parse(frame))
          this.tell()
        }
      }
    } catch {
      // cancelled or dropped: the stream has ended
    }
    this.ended = true
    this.tell()
  }

  private tell(): void {
    for (const wake of this.waiters) wake()
  }

  /** The events named `name` (all of them when none is given), comments left out. */
  named(name?: string): SseEvent[] {
    return this.events.filter((e) => !e.comment && (name === undefined || e.event === name))
  }

  /** Waits until `done` holds for the events so far (or the stream ends, or `ms` pass: a failure). */
  async until(
    done: (events: SseEvent[]) => boolean,
    ms = 15_000,
    what = 'the events',
  ): Promise<SseEvent[]> {
    const deadline = Date.now() + ms
    for (;;) {
      if (done(this.events)) return this.events
      if (this.ended) throw new Error(`the stream ended before ${what}: ${describe(this.events)}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`${what} did not come in ${ms} ms: ${describe(this.events)}`)
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer)
          this.waiters.delete(wake)
          resolve()
        }
        const timer = setTimeout(wake, left)
        this.waiters.add(wake)
      })
    }
  }

  /** Waits for the stream to end. */
  async end(ms = 15_000): Promise<void> {
    await this.until(() => this.ended, ms, 'the end of the stream').catch((err: Error) => {
      if (!this.ended) throw err
    })
  }

  /** Goes away, as a client that closes its connection. */
  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => undefined)
  }
}

function parse(frame: string): SseEvent {
  const event: SseEvent = { event: 'message', data: undefined, at: Date.now() }
  const data: string[] = []
  for (const line of frame.split('\n')) {
    if (line.startsWith(':')) event.comment = line.slice(1).trim()
    else if (line.startsWith('event: ')) event.event = line.slice(7)
    else if (line.startsWith('data: ')) data.push(line.slice(6))
    else if (line.startsWith('id: ')) event.id = line.slice(4)
  }
  if (data.length) event.data = JSON.parse(data.join('\n'))
  return event
}

function describe(events: SseEvent[]): string {
  return JSON.stringify(events.map((e) => (e.comment ? `:${e.comment}` : [e.event, e.data])))
}
