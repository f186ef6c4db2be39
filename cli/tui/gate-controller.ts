import type { Gate, GateDecision } from '../../shared/schemas/gates.js'
import type { Query } from '../client.js'
import { decisionWord, type Decided } from '../decisions.js'
import { ApiRequestError, CliError } from '../errors.js'

// The data side of `osctl gates review`: reads the waiting gates (GET /v1/gates) every few seconds and
// at once after a decision, keeps the selection steady as gates arrive and leave, and sends decisions
// (POST /v1/gates/{id}/decision). No ink here, so it is tested on its own and the screen stays pure.

/** What the screen needs of ApiClient; tests hand in an object with these two methods. */
export interface GateReviewClient {
  get<T = unknown>(path: string, query?: Query): Promise<T>
  post<T = unknown>(path: string, body?: unknown): Promise<T>
}

export interface GateFilters {
  taskId?: string
  runId?: string
  kind?: string
}

export interface Notice {
  tone: 'success' | 'error'
  text: string
}

export interface ReviewState {
  /** The waiting gates, newest first, as the daemon last answered (less those decided since). */
  gates: Gate[]
  selectedId: string | null
  /** The first read has answered (a list or an error). */
  loaded: boolean
  /** A read has worked: `gates` is what the daemon said, not an empty start. */
  listed: boolean
  /** Why the last read of the list failed; cleared by the next read that works. */
  error: string | null
  /** A decision is on its way. */
  sending: boolean
  /** What came of the last decision, shown until the next one. */
  notice: Notice | null
  /** Decisions this session made, oldest first (for the line left on the terminal at the end). */
  decided: (Decided & { gate: Gate })[]
}

export type DecisionOutcome =
  { ok: true; gate: Gate } | { ok: false; alreadyDecided: boolean; message: string }

export interface ControllerOptions {
  filters?: GateFilters
  /** How often the list is read again; 3 s unless told. */
  intervalMs?: number
}

export const defaultIntervalMs = 3000

const pastTense: Record<GateDecision['decision'], string> = {
  approve: 'Approved',
  reject: 'Rejected',
  request_changes: 'Asked for changes on',
}

/** An approve that carries answers or a choice answered a question (issue 51): it says so. */
const pastTenseOf = (body: GateDecision) =>
  decisionWord(body) === 'answered' ? 'Answered' : pastTense[body.decision]

/** A gate as a person names it in one line: its task (or "chat") and its tool or "question". */
export function gateLabel(gate: Gate): string {
  const what = gate.kind === 'question' ? 'question' : (gate.tool ?? 'tool call')
  return `${gate.taskSlug ?? (gate.runId ? 'run' : 'chat')} ${what}`
}

/** An error as one line for the screen: the API's code and message, or what went wrong on the way. */
export function describeError(err: unknown): string {
  if (err instanceof ApiRequestError) {
    return err.status === 401 ? err.message : `${err.code}: ${err.message}`
  }
  if (err instanceof CliError) return err.message
  return err instanceof Error ? err.message : String(err)
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

export class GateReviewController {
  private state: ReviewState = {
    gates: [],
    selectedId: null,
    loaded: false,
    listed: false,
    error: null,
    sending: false,
    notice: null,
    decided: [],
  }
  private readonly listeners = new Set<() => void>()
  private timer: ReturnType<typeof setInterval> | undefined
  /** Each read takes a ticket; only the newest read's answer is applied, and a decision voids the
   *  reads already on their way (they may still list the gate it decided). */
  private ticket = 0
  private reads = 0
  private stopped = false

  constructor(
    private readonly client: GateReviewClient,
    private readonly options: ControllerOptions = {},
  ) {}

  get intervalMs(): number {
    return this.options.intervalMs ?? defaultIntervalMs
  }

  /** For useSyncExternalStore: the same object until something changes. */
  getState = (): ReviewState => this.state

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Reads the list now and then every intervalMs, until stop(). */
  start(): void {
    this.stopped = false
    void this.refresh()
    this.timer ??= setInterval(() => void this.refresh({ ifIdle: true }), this.intervalMs)
  }

  stop(): void {
    this.stopped = true
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
  }

  selected(): Gate | undefined {
    return this.state.gates.find((g) => g.id === this.state.selectedId)
  }

  /** Moves the selection by `delta` rows, stopping at either end. */
  move(delta: number): void {
    const { gates, selectedId } = this.state
    if (gates.length === 0) return
    const at = Math.max(
      0,
      gates.findIndex((g) => g.id === selectedId),
    )
    const next = gates[Math.min(gates.length - 1, Math.max(0, at + delta))]!
    if (next.id !== selectedId) this.set({ selectedId: next.id })
  }

  /** Reads GET /v1/gates. With ifIdle (the timer) it skips a beat while an earlier read is still out. */
  async refresh(options: { ifIdle?: boolean } = {}): Promise<void> {
    if (options.ifIdle && this.reads > 0) return
    const ticket = ++this.ticket
    this.reads++
    try {
      const gates = await this.client.get<Gate[]>('/gates', { ...this.options.filters })
      if (ticket !== this.ticket || this.stopped) return
      this.setGates(Array.isArray(gates) ? gates : [], { loaded: true, listed: true, error: null })
    } catch (err) {
      if (ticket !== this.ticket || this.stopped) return
      this.set({ loaded: true, error: describeError(err) })
    } finally {
      this.reads--
    }
  }

  /**
   * Sends a decision. The gate leaves the list when it lands, and also when the daemon answers that it
   * was decided meanwhile (409 gate_not_waiting), which is told inline; other refusals keep it listed.
   * The list is read again at once either way.
   */
  async decide(gate: Gate, body: GateDecision): Promise<DecisionOutcome> {
    if (this.state.sending) return { ok: false, alreadyDecided: false, message: 'already sending' }
    this.set({ sending: true, notice: null })
    this.ticket++ // reads already out may still list this gate
    let outcome: DecisionOutcome
    try {
      const decided = await this.client.post<Gate>(`/gates/${gate.id}/decision`, body)
      outcome = { ok: true, gate: decided }
      this.setGates(without(this.state.gates, gate.id), {
        sending: false,
        notice: { tone: 'success', text: `${pastTenseOf(body)} ${gateLabel(gate)}` },
        decided: [...this.state.decided, { ...body, gate }],
      })
    } catch (err) {
      const alreadyDecided = errorCode(err) === 'gate_not_waiting'
      const was = (err as { body?: { decision?: unknown } }).body?.decision
      const message = alreadyDecided
        ? `${gateLabel(gate)} was already decided${typeof was === 'string' ? ` (${was})` : ''} elsewhere; it has left the list`
        : `Could not decide ${gateLabel(gate)}: ${describeError(err)}`
      outcome = { ok: false, alreadyDecided, message }
      const gates = alreadyDecided ? without(this.state.gates, gate.id) : this.state.gates
      this.setGates(gates, { sending: false, notice: { tone: 'error', text: message } })
    }
    if (!this.stopped) void this.refresh()
    return outcome
  }

  /** A new list: the selection stays on its gate, or (when that gate left) on the row where it was. */
  private setGates(gates: Gate[], rest: Partial<ReviewState>): void {
    const { gates: before, selectedId } = this.state
    let next = gates.find((g) => g.id === selectedId)?.id
    if (next === undefined && gates.length > 0) {
      const was = before.findIndex((g) => g.id === selectedId)
      next = gates[Math.min(Math.max(was, 0), gates.length - 1)]!.id
    }
    this.set({ ...rest, gates, selectedId: next ?? null })
  }

  private set(patch: Partial<ReviewState>): void {
    this.state = { ...this.state, ...patch }
    for (const listener of this.listeners) listener()
  }
}

function without(gates: Gate[], id: string): Gate[] {
  return gates.filter((g) => g.id !== id)
}
