import { firstBytes } from '../../../egress.js'
import { errorBodyMaxBytes, type StreamRequest } from '../stream.js'
import type { OnText, TokenUsage } from '../../../domain/models/index.js'
import type { Provider } from '../../../../shared/schemas/models.js'
import type { Logger } from '../../../log.js'

// What both wire formats share (providers.ts): their options, tool names as providers accept them,
// one SDK client per key and the fetch it reads answers with, arguments in one order, and the text a
// streamed call told.

export interface ProviderOptions {
  baseUrls: Record<Provider, string>
  /** Milliseconds before an unstreamed call gives up (OSD_MODEL_TIMEOUT_SECONDS; default 120 s). */
  timeoutMs?: number
  /**
   * Milliseconds a streamed call may go without a piece of its answer, its first included
   * (OSD_MODEL_IDLE_SECONDS; default 60 s): a long answer that keeps coming is not cut.
   */
  idleMs?: number
  /** Tries again in place after a blip (retries.ts); default 2. */
  maxRetries?: number
  /** Cache breakpoints on provider_a's requests (Config.promptCache, OSD_PROMPT_CACHE); on unless false. */
  promptCache?: boolean
  /** Where a provider says what it learnt of a connection (one that refuses cache breakpoints). */
  log?: Logger
}

// --- tool names: providers accept [a-zA-Z0-9_-]{1,64}; ours have dots ---------------------------------

/** Maps tool names both ways for one request: `os.finish` <-> `os__finish`. */
export class ToolNames {
  private toWire = new Map<string, string>()
  private fromWire = new Map<string, string>()

  constructor(names: string[]) {
    for (const name of names) {
      let wire = name
        .replace(/\./g, '__')
        .replace(/[^a-zA-Z0-9_-]/g, '_')
        .slice(0, 60)
      for (let n = 2; this.fromWire.has(wire); n++) wire = `${wire.slice(0, 57)}_${n}`
      this.toWire.set(name, wire)
      this.fromWire.set(wire, name)
    }
  }

  wire(name: string): string {
    return this.toWire.get(name) ?? name
  }

  original(wire: string): string {
    return this.fromWire.get(wire) ?? wire
  }
}

/**
 * A module imported at its first use, once: the SDKs are most of what osd (and every test file) would
 * load at start, and a process that never calls a model needs neither.
 */
export function onFirstUse<M>(load: () => Promise<M>): () => Promise<M> {
  let loading: Promise<M> | undefined
  return () =>
    (loading ??= load().catch((err: unknown) => {
      loading = undefined // tried again at the next call
      throw err
    }))
}

/** Clients kept at most, per provider: one per key in use. */
const clientsKept = 64

/**
 * One SDK client per key, kept for the key's next calls: making one costs more than the call it makes
 * to a fast provider (the Anthropic SDK reads its credential files from disk each time one is made).
 */
export function clientsByKey<C>(make: (key: string) => C): (key: string) => C {
  const clients = new Map<string, C>()
  return (key) => {
    let client = clients.get(key)
    if (client) {
      clients.delete(key) // kept in the order of use: the least recently used goes first
    } else {
      client = make(key)
      if (clients.size >= clientsKept) clients.delete(clients.keys().next().value!)
    }
    clients.set(key, client)
    return client
  }
}

/**
 * The largest answer of an unstreamed call osd reads: a provider's are a few hundred KB at most (an
 * answer of 128,000 tokens and its tool calls' arguments), so a body past it is no provider's.
 */
export const answerMaxBytes = 16 * 1024 * 1024

/**
 * The fetch the SDKs make their unstreamed calls with: the global one, whose answer's body is read no
 * further than its cap, as a streamed call's (stream.ts). A server at the provider's address that
 * sends without end (a gateway gone wrong, an address that is no provider) was read whole into
 * memory, a refusal's body before its words were cut to 300 characters (failures.ts), and the call
 * ran until its timeout. A refusal's first `errorBodyMaxBytes` are its words; an answer past
 * `answerMaxBytes` fails, an outage. Either way the connection is closed there.
 */
export const boundedFetch = async (
  input: string | URL | Request,
  init?: RequestInit,
): Promise<Response> => {
  const res = await fetch(input, init)
  if (!res.body) return res
  const answer = { status: res.status, statusText: res.statusText, headers: res.headers }
  if (!res.ok) return new Response(await firstBytes(res.body, errorBodyMaxBytes), answer)
  const reader = res.body.getReader()
  let read = 0
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read()
      if (done) return controller.close()
      read += value.byteLength
      if (read <= answerMaxBytes) return controller.enqueue(value)
      await reader.cancel()
      controller.error(new Error(`the answer is longer than ${answerMaxBytes} bytes`))
    },
    cancel: (reason) => reader.cancel(reason),
  })
  return new Response(body, answer)
}

export const noUsage = (): TokenUsage => ({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 })

/**
 * The text a streamed call tells, and whether it told any yet: a call that told some is not tried again
 * (its reader would see it twice).
 */
export function telling(onText: OnText | undefined): {
  onText: OnText | undefined
  any: () => boolean
} {
  if (!onText) return { onText, any: () => false }
  let told = false
  return {
    onText: (text) => {
      told = true
      onText(text)
    },
    any: () => told,
  }
}

/**
 * A tool call's arguments with every object's keys in one order: the same call is sent as the same
 * bytes at every later call of the conversation, also once its arguments have come back from the
 * database (jsonb keeps keys in an order of its own), so the provider's cache matches the prefix.
 */
export function canonical<T>(value: T): T {
  if (Array.isArray(value)) return value.map(canonical) as T
  if (value === null || typeof value !== 'object') return value
  const sorted: Record<string, unknown> = {}
  for (const key of Object.keys(value).sort())
    sorted[key] = canonical((value as Record<string, unknown>)[key])
  return sorted as T
}

export function parseArguments(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text || '{}') as unknown
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : { value }
  } catch {
    return { unparsed: text }
  }
}

export type StreamTarget = Omit<StreamRequest, 'body' | 'onEvent'>
