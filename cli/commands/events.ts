import { createParser } from 'eventsource-parser'
import type { Command } from 'commander'
import type { FeedEvent, FeedPage } from '../../shared/schemas/events.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import type { ApiClient } from '../client.js'
import { ApiRequestError, UnreachableError, UsageError } from '../errors.js'
import { summarisePayload } from '../events.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'

// osctl events follow (issue 47): the enterprise's event feed as it comes, through GET /v1/events as
// server-sent events. A stream that drops (osd restarting, a proxy's timeout, silence past the pings)
// is opened again with the last position read as Last-Event-ID: nothing is missed and nothing printed
// twice. On a terminal one line per event; on a pipe (or with --json) one JSON object per line.

/** A stream that says nothing for this long (osd pings every 15 s) is taken as dropped. */
const idleMs = 45_000

/** Waits between attempts to reach osd again, growing to the last. */
const reconnectMs = [500, 1_000, 2_000, 5_000, 10_000]

interface FollowFlags {
  types?: string
  after?: string
  count?: string
}

/** A whole number from `min`, or a usage error naming the flag. */
function wholeNumber(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`${flag} takes a whole number from ${min}, not "${value}"`)
  return n
}

/** One line for a person: the position, the time, the type, the subject and the payload in short. */
export function formatFeedEvent(event: FeedEvent): string {
  const subject = Object.entries(event.subject)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ')
  return [
    String(event.position).padStart(6),
    safeText(event.createdAt),
    safeText(event.type).padEnd(22),
    safeText(subject),
    summarisePayload(event.payload, 80),
  ]
    .join('  ')
    .trimEnd()
}

export async function followEvents(deps: Deps, flags: FollowFlags): Promise<void> {
  const count = wholeNumber('--count', flags.count, 1)
  let last = wholeNumber('--after', flags.after, 0)
  const lines = deps.out.json || !deps.out.isTTY
  const client = deps.client()
  let printed = 0
  let failures = 0
  for (;;) {
    const ended = new AbortController()
    let timer: ReturnType<typeof setTimeout> | undefined
    const watch = () => {
      clearTimeout(timer)
      timer = setTimeout(() => ended.abort(), idleMs)
    }
    try {
      watch()
      // "From now" is from the feed's newest position as the follow begins, asked once: a stream
      // opened from now that dropped before its first event was opened again from a later now, and
      // what came while it was away was never printed.
      last ??= await feedHead(client, flags.types, ended.signal)
      const body = await client.stream('/events', {
        query: flags.types ? { types: flags.types } : {},
        // The position is the SSE id: from the last one read, else from --after, else from the head.
        headers: last === undefined ? {} : { 'last-event-id': String(last) },
        signal: ended.signal,
      })
      failures = 0
      const ready: FeedEvent[] = []
      const parser = createParser({
        onEvent: (message) => {
          try {
            ready.push(JSON.parse(message.data) as FeedEvent)
          } catch {
            // not an event of the feed: nothing to print
          }
        },
      })
      const decoder = new TextDecoder()
      for await (const chunk of body) {
        watch()
        parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }))
        while (ready.length > 0) {
          const event = ready.shift()!
          deps.out.write(lines ? `${JSON.stringify(event)}\n` : `${formatFeedEvent(event)}\n`)
          last = event.position
          if (count !== undefined && ++printed >= count) return
        }
      }
      // osd ended the stream (it stops): read on from the last position once it is back.
    } catch (err) {
      // A refusal (a scope, a malformed filter) is final; a daemon out of reach or silent is not.
      if (err instanceof ApiRequestError && err.status < 500 && err.status !== 429) throw err
      const passing =
        err instanceof UnreachableError ||
        err instanceof ApiRequestError ||
        ended.signal.aborted ||
        isDropped(err)
      if (!passing) throw err
      const wait = reconnectMs[Math.min(failures, reconnectMs.length - 1)]!
      failures++
      deps.out.error(
        `${safeText((err as Error).message)}; reading again from position ${last ?? 'now'} in ${wait / 1000}s\n`,
      )
      await new Promise((resolve) => setTimeout(resolve, wait))
    } finally {
      clearTimeout(timer)
      ended.abort()
    }
  }
}

/**
 * The feed's newest position as the caller may read it: the `next` of a page asked from past it (the
 * feed answers such a reader with where it reads on from: docs/events.md, feed.reset).
 */
async function feedHead(
  client: ApiClient,
  types: string | undefined,
  signal: AbortSignal,
): Promise<number> {
  const query = { after: Number.MAX_SAFE_INTEGER, limit: 1, ...(types ? { types } : {}) }
  return (await client.get<FeedPage>('/events', query, signal)).next
}

/** A connection that dropped while reading (a reset, a socket closed under the stream). */
function isDropped(err: unknown): boolean {
  const code = (err as { code?: string })?.code ?? ''
  return (
    /^(UND_ERR_|ECONNRESET|EPIPE|ECONNREFUSED)/.test(code) || (err as Error)?.name === 'AbortError'
  )
}

export function registerEvents(program: Command, makeDeps: MakeDeps): void {
  const events = program.command('events').description(about.events)
  examples(
    events
      .command('follow')
      .description(
        "the enterprise's events as they come, one line each (one JSON object each on a pipe or with --json); reconnects by itself and misses nothing",
      )
      .option('--types <types>', 'comma-separated types or families: run.failed,gate.*')
      .option('--after <position>', 'start after this position (0: from the oldest kept), not now')
      .option('--count <n>', 'stop after this many events')
      .action(actionOf(makeDeps, followEvents)),
    'osctl events follow',
    'osctl events follow --types gate.waiting,run.failed --json | jq .subject',
    'osctl events follow --after 0 --count 100',
  )
}
