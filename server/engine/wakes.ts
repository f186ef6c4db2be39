import type { Sql } from '../db/sql.js'

/**
 * What wakes an engine loop (DESIGN 5): the NOTIFYs of a channel, the same payloads told at this
 * process's own commits (`listenLocally`, heard first), each heard once, a reconnect of the listener,
 * and a sweep every `sweepMs` as the safety net should a notification be lost. `heard` gets a payload;
 * `wake` the rest. Stopped by the answer's stop().
 */
export async function followWakes(options: {
  sql: Sql
  channel: string
  listenLocally: (heard: (payload: string) => void) => () => void
  heard: (payload: string) => void
  wake: () => void
  sweepMs: number
}): Promise<{ stop(): Promise<void> }> {
  const { heard, wake } = options
  // Payloads heard from this process's commits whose NOTIFY has not come back yet: when it does, it is
  // not heard twice.
  const heardLocally = new Set<string>()
  const unlistenLocally = options.listenLocally((payload) => {
    heardLocally.add(payload)
    heard(payload)
  })
  const listener = await options.sql.listen(
    options.channel,
    (payload) => {
      if (!heardLocally.delete(payload)) heard(payload)
    },
    wake,
  )
  const sweep = setInterval(() => {
    heardLocally.clear() // bounded, should a NOTIFY never come back: a spare wake at worst
    wake()
  }, options.sweepMs)
  return {
    async stop() {
      clearInterval(sweep)
      unlistenLocally()
      await listener.unlisten().catch(() => undefined)
    },
  }
}
