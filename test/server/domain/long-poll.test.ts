import { describe, expect, it } from 'vitest'
import { longPoll, longPollMs, type LongPoll } from '../../../server/domain/long-poll/index.js'

// The one long-poll of runs and chats (DESIGN 5, 11; issue 43), with a watch the test wakes by hand:
// how long it may hold, which reads it makes and that it leaves no wait behind. The routes' tests
// (runs.test.ts, chats.test.ts) and test/server/processes/long-poll.test.ts hold it to the database,
// to NOTIFY from another process and to the daemon's stop.

/** A watch whose waits the test ends: `wake()` ends the newest, as a change or its time would. */
function fakeWatch() {
  const subscribed: { key: string; ms: number; signal?: AbortSignal }[] = []
  let open = 0
  let wakeNewest: (() => void) | undefined
  return {
    subscribed,
    get open() {
      return open
    },
    wake: () => wakeNewest?.(),
    subscribe(key: string, ms: number, signal?: AbortSignal) {
      subscribed.push({ key, ms, signal })
      open++
      let resolve!: () => void
      const ready = new Promise<void>((r) => (resolve = r))
      wakeNewest = resolve
      if (signal?.aborted) resolve()
      signal?.addEventListener('abort', () => resolve(), { once: true })
      let cancelled = false
      const cancel = () => {
        if (!cancelled) open--
        cancelled = true
        resolve()
      }
      // As ChangeWatch's: a wait that ends lets go of its listener by itself.
      void ready.then(cancel)
      return { ready, cancel }
    },
  }
}

/** A poll whose reads answer from `answers` in turn (true: something new), recording each read. */
function poll(
  watch: ReturnType<typeof fakeWatch>,
  answers: boolean[],
  more: Partial<LongPoll<{ n: number; found: boolean; last: boolean }>> = {},
) {
  const reads: { n: number; found: boolean; last: boolean }[] = []
  const options: LongPoll<{ n: number; found: boolean; last: boolean }> = {
    key: 'k',
    waitSeconds: 10,
    wait: { watch },
    read: async (last) => {
      const read = { n: reads.length, found: answers[reads.length] ?? false, last }
      reads.push(read)
      return read
    },
    answers: (read) => read.found,
    ...more,
  }
  return { reads, answer: longPoll(options) }
}

/** Lets the poll run until it waits again. */
const settle = () => new Promise((r) => setTimeout(r, 10))

describe('the long-poll (issue 43)', () => {
  it('holds at most 30 s whatever waitSeconds asks, and not at all for none, 0 or below', () => {
    // The route refuses a waitSeconds out of 0..30 (400, query-parameters.test.ts); the domain holds a
    // caller in the daemon to the same bounds.
    expect(longPollMs(999)).toBe(30_000)
    expect(longPollMs(30)).toBe(30_000)
    expect(longPollMs(2.5)).toBe(2_500)
    for (const none of [undefined, 0, -5, NaN]) expect(longPollMs(none)).toBe(0)
  })

  it('waits 30 s for waitSeconds=999: the watch is asked for no more', async () => {
    const watch = fakeWatch()
    const { reads, answer } = poll(watch, [false, true], { waitSeconds: 999 })
    await settle()
    expect(watch.subscribed).toEqual([{ key: 'k', ms: 30_000, signal: undefined }])
    watch.wake()
    expect((await answer).n).toBe(1)
    expect(reads.map((r) => r.last)).toEqual([false, false])
    expect(watch.open).toBe(0)
  })

  it('reads once and at once without a wait, without waitSeconds, or when the first read answers', async () => {
    for (const more of [{ wait: undefined }, { waitSeconds: undefined }, { waitSeconds: 0 }]) {
      const watch = fakeWatch()
      const { reads, answer } = poll(watch, [false], more)
      expect(await answer).toEqual({ n: 0, found: false, last: true })
      expect(reads).toHaveLength(1)
      expect(watch.subscribed).toEqual([])
    }
    const watch = fakeWatch()
    const { reads, answer } = poll(watch, [true])
    expect((await answer).found).toBe(true)
    expect(reads).toEqual([{ n: 0, found: true, last: false }])
    expect(watch.open).toBe(0)
  })

  it('answers a wake that finds something new, and reads a last time when the time is up', async () => {
    const watch = fakeWatch()
    const { reads, answer } = poll(watch, [false, false, true])
    await settle()
    watch.wake() // a change that is not the one awaited: wait again, for what is left of the time
    await settle()
    expect(watch.subscribed).toHaveLength(2)
    expect(watch.subscribed[1]!.ms).toBeLessThanOrEqual(10_000)
    watch.wake()
    expect(await answer).toEqual({ n: 2, found: true, last: false })
    expect(watch.open).toBe(0)

    const timed = fakeWatch()
    const out = poll(timed, [false], { waitSeconds: 0.05 })
    // The watch's own timer is the fake's to keep: the deadline passes, then the wait ends.
    await new Promise((r) => setTimeout(r, 60))
    timed.wake()
    expect(await out.answer).toEqual({ n: 1, found: false, last: true })
    expect(timed.open).toBe(0)
  })

  it('is cut short by its signal: at once when it already aborted, else at the abort', async () => {
    const stopped = new AbortController()
    stopped.abort()
    const watch = fakeWatch()
    const first = poll(watch, [false], { wait: { watch, signal: stopped.signal } })
    expect(await first.answer).toEqual({ n: 0, found: false, last: true })
    expect(first.reads).toHaveLength(1)

    const stopping = new AbortController()
    const later = fakeWatch()
    const second = poll(later, [false, false], { wait: { watch: later, signal: stopping.signal } })
    await settle()
    expect(later.subscribed[0]!.signal).toBe(stopping.signal)
    stopping.abort()
    expect(await second.answer).toEqual({ n: 1, found: false, last: true })
    expect(later.open).toBe(0)
  })

  it('looks with `changed` after a wake and reads the answer only when it says so', async () => {
    const watch = fakeWatch()
    const looks: boolean[] = [false, true]
    let looked = 0
    const { reads, answer } = poll(watch, [false, true], {
      changed: async () => looks[looked++]!,
    })
    await settle()
    watch.wake()
    await settle()
    expect(looked).toBe(1)
    expect(reads).toHaveLength(1) // nothing new: no read of the answer
    watch.wake()
    expect(await answer).toEqual({ n: 1, found: true, last: true })
    expect(looked).toBe(2)
    expect(watch.open).toBe(0)
  })

  it('stops waiting when a read fails', async () => {
    const watch = fakeWatch()
    const failing = longPoll({
      key: 'k',
      waitSeconds: 10,
      wait: { watch },
      read: async () => {
        throw new Error('chat_not_found')
      },
      answers: () => false,
    })
    await expect(failing).rejects.toThrow('chat_not_found')
    expect(watch.subscribed).toHaveLength(1)
    expect(watch.open).toBe(0)
  })
})
