import type { Provider } from '../../../shared/schemas/models.js'
import { storable } from '../../../shared/text.js'

// What the domain needs of a model provider (DESIGN 6): the calls it is asked to make and how they fail.
// The engine implements it (engine/models/providers.ts: provider_a and provider_b over their wire
// formats); the domain uses it to list a provider's models. Here, not in engine/, so that nothing of
// domain/ imports the engine.

export interface ToolSpec {
  name: string
  description: string
  parameters: Record<string, unknown>
}

export interface ToolCall {
  id: string
  name: string
  arguments: Record<string, unknown>
}

export type Message =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text: string | null; toolCalls: ToolCall[] }
  | { role: 'tool'; results: { callId: string; content: string; isError?: boolean }[] }

export interface ModelRequest {
  model: string
  system: string
  messages: Message[]
  tools: ToolSpec[]
  maxTokens: number
  /**
   * How many of the messages, from the first, the next call of this conversation sends again unchanged
   * (all of them unless said). A chat reply says fewer: its newest person message carries what memory
   * recalled for it, for this turn only. provider_a puts a cache breakpoint after them as well, so the
   * next call reads them from the provider's cache (DESIGN 13).
   */
  stableMessages?: number
}

/**
 * The tokens a call was billed for, each kind once (DESIGN 13): `input` is the input neither read from
 * nor written to the provider's prompt cache (Anthropic's input_tokens; OpenAI's prompt_tokens less its
 * cached_tokens), `cacheRead` and `cacheWrite` the input read from and written to it.
 */
export interface TokenUsage {
  input: number
  output: number
  cacheRead: number
  cacheWrite: number
}

export interface ModelReply {
  text: string | null
  toolCalls: ToolCall[]
  usage: TokenUsage
  model: string
  /** Why the provider stopped (stop_reason, finish_reason: end_turn, tool_use, stop, length, ...). */
  finishReason?: string
}

export interface Credentials {
  /** An API key, or a subscription's access token (provider_b, sent as a bearer token). */
  key: string
  /**
   * The connection (llm_connections) the key is of: what a provider learns about it (that it refuses
   * cache breakpoints) is remembered under it.
   */
  connectionId?: string
}

/**
 * Text of the answer as it comes, for a call made with streaming on (a chat reply shown as it is
 * made). The call's answer is the same as without it: joined in order, the pieces are its text.
 */
export type OnText = (text: string) => void

export interface ModelProvider {
  call(
    request: ModelRequest,
    credentials: Credentials,
    signal: AbortSignal,
    onText?: OnText,
    /** Headers the call carries onward: its span's traceparent when traced (issue 49). */
    headers?: Record<string, string>,
  ): Promise<ModelReply>
  listModels(credentials: Credentials, signal: AbortSignal): Promise<string[]>
  /**
   * The operator set this provider's address (OSD_PROVIDER_A_BASE_URL, OSD_PROVIDER_B_BASE_URL): a
   * local or compatible server. A model with no price is then priced at 0, unpriced (prices.ts).
   */
  readonly baseUrlSetByOperator?: boolean
}

/** Why a provider call did not answer (DESIGN 6), decided once: engine/models/failures.ts. */
export type FailureKind =
  /** The key was refused (401, 403): the work waits for a working key. */
  | 'refused_key'
  /** The provider asked to be called less (429 too many requests, 529 overloaded). */
  | 'throttled'
  /** No answer, a 5xx, a timeout: the work waits its back-off. */
  | 'outage'
  /** The provider refused the request itself (another 4xx): trying again would not help. */
  | 'bad_request'
  /** The caller stopped the call. */
  | 'aborted'

export interface ProviderErrorDetail {
  /** The provider's status, when it answered one. */
  status?: number
  /**
   * How long to wait before the connection is called again: the provider's word
   * (`retry-after-ms`, `retry-after`), or the wait the engine chose from it (models/throttles.ts).
   */
  retryAfterMs?: number
  /**
   * An outage because the call took too long (OSD_MODEL_TIMEOUT_SECONDS) or its stream went quiet
   * (OSD_MODEL_IDLE_SECONDS): set where the timeout is found, so nothing reads it from the words.
   */
  timedOut?: boolean
  /** False when this process chose not to call (its key throttled a moment ago): no status then. */
  called?: boolean
  /** No connection could be made: the message names the address and the setting that moves it. */
  unreachable?: boolean
}

/** A failed provider call. Never changed once made: `waiting` makes another with the wait chosen. */
export class ProviderError extends Error {
  readonly status?: number
  readonly retryAfterMs?: number
  readonly timedOut: boolean
  readonly called: boolean
  readonly unreachable: boolean

  constructor(
    readonly kind: FailureKind,
    message: string,
    detail: ProviderErrorDetail = {},
  ) {
    // Kept as a run's reason and in its events: what a provider said may hold U+0000, or half of a
    // surrogate pair where it was cut short (failures.ts), which PostgreSQL cannot store.
    super(storable(message))
    this.status = detail.status
    this.retryAfterMs = detail.retryAfterMs
    this.timedOut = detail.timedOut ?? false
    this.called = detail.called ?? true
    this.unreachable = detail.unreachable ?? false
  }

  get throttled(): boolean {
    return this.kind === 'throttled'
  }

  /** The same failure, its work to wait `retryAfterMs` before the connection is called again. */
  waiting(retryAfterMs: number): ProviderError {
    const { status, timedOut, called, unreachable } = this
    return new ProviderError(this.kind, this.message, {
      status,
      timedOut,
      called,
      unreachable,
      retryAfterMs,
    })
  }
}
