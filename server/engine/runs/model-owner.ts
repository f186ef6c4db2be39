import type { Provider } from '../../../shared/schemas/models.js'
import type { Db } from '../../db/sql.js'
import {
  addRunCost,
  appendEvent,
  endModelStep,
  journalHead,
  type RunRow,
  setStepCost,
  startModelStep,
  transition,
} from '../../domain/runs/index.js'
import type { CallOwner } from '../models/index.js'
import { responseOf } from './journal.js'
import { usd } from '../../../shared/money.js'

// A run's side of the one model-call step (engine/models/call.ts): how the step's reservation, journal
// entry, settlement and event are the run's, and what it learnt on the way that the agent loop acts on
// after the call (the row it locked, whether its journal was behind, the run's cost after the call).

export class RunModelCall {
  /** The run as the reservation's lock read it (undefined: no longer this engine's). */
  locked: RunRow | undefined
  /** The database's journal was ahead of this engine's: the call was not made (issue 42). */
  behind = false
  /** The run's cost after this call, as the settlement's update answered it. */
  spent: number
  /** Another engine ended the step (as interrupted) before this one settled it. */
  private stepEnded = false

  constructor(
    private readonly run: RunRow,
    private readonly step: number,
    private readonly request: { provider: Provider; model: string },
    /** The run's row, locked, if this engine still holds it. */
    private readonly lockRun: (tx: Db) => Promise<RunRow | undefined>,
  ) {
    this.spent = run.costUsdMicros
  }

  owner(): CallOwner {
    const { run, step, request } = this
    return {
      layers: run,
      // The journal is checked before every call: one behind the database's is read again, and
      // the call not made (issue 42).
      lock: async (tx) => {
        const [row, head] = await Promise.all([this.lockRun(tx), journalHead(tx, run.id)])
        this.locked = row
        this.behind = head >= step
        return Boolean(row) && !this.behind
      },
      // The reservation is the run's (spend_reservations): released by this call's settlement, or
      // by the engine that takes the run over after a crash (settleInterrupted), once.
      reservedFor: { runId: run.id },
      // The journal's step, started with the reservation: a run resumed finds it and makes the
      // call again (settleInterrupted ends it as interrupted).
      hold: (tx, held) =>
        startModelStep(tx, run, {
          step,
          request,
          connectionId: held.connectionId,
          reservedUsdMicros: held.micros,
        }),
      refused: (tx, refusal) =>
        transition(
          tx,
          this.locked!,
          'paused_spend',
          { reason: undefined },
          {
            because: `the ${refusal.layer} daily cap of ${usd(refusal.capCents)} has no room for the next model call`,
            layer: refusal.layer,
            layerId: refusal.layerId,
          },
        ),
      // The call was made and is paid for whoever holds the run now. If another engine holds it
      // (this one stalled past its lease), that one has ended the step as interrupted and released
      // its reservation: the answer is not this run's to act on, and the reservation is not
      // released twice.
      claim: async (tx, _held, outcome) => {
        const [row, ended] = await Promise.all([
          this.lockRun(tx),
          endModelStep(
            tx,
            run.id,
            step,
            'reply' in outcome
              ? { state: 'done', response: responseOf(outcome), costUsdMicros: outcome.costMicros }
              : { state: 'failed', response: responseOf(outcome) },
          ),
        ])
        this.stepEnded = ended
        return { mine: Boolean(row) }
      },
      record: async (tx, outcome, { mine }, last) => {
        if (!('reply' in outcome)) return void (await last())
        const { reply, costMicros, unpriced } = outcome
        const [, total] = await Promise.all([
          // The step another engine ended as interrupted meanwhile gets the call's cost all the same.
          this.stepEnded ? undefined : setStepCost(tx, run.id, step, costMicros),
          addRunCost(tx, run.id, costMicros, unpriced),
          appendEvent(tx, run, 'model.called', {
            model: request.model,
            provider: request.provider,
            // Each kind of token once, as billed (DESIGN 13): the input at full price, the input
            // read from and written to the provider's cache, the output.
            inputTokens: reply.usage.input,
            cacheReadTokens: reply.usage.cacheRead,
            cacheWriteTokens: reply.usage.cacheWrite,
            outputTokens: reply.usage.output,
            costUsdCents: costMicros / 10_000,
            ...(unpriced ? { unpriced: true } : {}),
            toolCalls: reply.toolCalls.map((c) => c.name),
            ...(mine ? {} : { afterTakeover: true }),
          }),
          last(),
        ])
        this.spent = total
      },
    }
  }
}
