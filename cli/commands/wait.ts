import type { Command } from 'commander'
import type { Gate } from '../../shared/schemas/gates.js'
import type { Run } from '../../shared/schemas/runs.js'
import {
  finishedStatuses,
  gateDecisions,
  runStatuses,
  type RunStatus,
} from '../../shared/values.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError, afterAnswer, exitCodes } from '../errors.js'
import { followRun, interruptible, isPassing } from '../follow.js'
import { printFields, show } from '../output.js'
import { resolveId } from '../resolve.js'
import { about } from './about.js'
import { pauseNoteOnce } from './runs.js'

// osctl wait run|gate ID --for=STATUS [--timeout 10m] (issue 48), kubectl wait's shape for a pipeline:
// exit 0 once the run (or gate) reaches STATUS, 1 when it ends (is decided) otherwise first, 8 when
// the timeout passes first (as `runs wait`). A run is followed with the daemon's long-poll
// (cli/follow.ts), so nothing polls busily; a gate, which has none, is read again every second or so.

/** A duration: seconds (`90`), or numbers with units s, m, h (`10m`, `1h30m`). */
export function parseDuration(value: string): number {
  const text = value.trim()
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text)
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(h|m|s)/g)]
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text)
    throw new UsageError(`--timeout takes a duration (90, 90s, 10m, 1h30m); got "${value}"`)
  const unit = { h: 3600, m: 60, s: 1 } as const
  return parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2] as keyof typeof unit], 0)
}

/** Thrown out of the follow once the run reaches the status waited for. */
class Reached {
  constructor(readonly run: Run) {}
}

interface WaitOptions {
  for: string
  timeout?: string
}

/** The end of a wait: the object (JSON, or its fields), then the exit code that says how it went. */
function end(
  deps: Deps,
  what: string,
  value: Run | Gate,
  fields: [string, unknown][],
  code: number,
  why: string,
) {
  show(deps.out, value, () => printFields(deps.out, fields))
  if (code !== exitCodes.ok) throw afterAnswer(`${what} ${why}`, code)
}

export async function waitRun(deps: Deps, ref: string, opts: WaitOptions): Promise<void> {
  const target = opts.for as RunStatus
  if (!runStatuses.includes(target))
    throw new UsageError(`--for takes a run status: ${runStatuses.join(', ')}; got "${opts.for}"`)
  const timeout = opts.timeout === undefined ? undefined : parseDuration(opts.timeout)
  const id = await resolveId(deps.client(), 'run', ref)
  let run: Run
  let ended: boolean
  /** The pauses said so far: a run held by one is said once, with the resume that lets it go. */
  const told = new Set<string>()
  try {
    const result = await interruptible(deps.onInterrupt, id, (signal) =>
      followRun(deps.client(), id, {
        signal,
        timeoutSeconds: timeout,
        onRun: (read) => {
          if (read.status === target) throw new Reached(read)
          // On stderr, as the other waiters say it (runs wait, runs start --wait): stdout is the run.
          const paused = pauseNoteOnce(read, told)
          if (paused) deps.out.error(`${paused}\n`)
        },
      }),
    )
    ;({ run, ended } = result)
  } catch (err) {
    if (!(err instanceof Reached)) throw err
    ;({ run } = err)
    ended = true
  }
  const fields: [string, unknown][] = [
    ['id', run.id],
    ['status', run.status],
    ['reason', run.reason],
  ]
  if (run.status === target) return end(deps, `run ${id}`, run, fields, exitCodes.ok, '')
  if (!ended || !finishedStatuses.includes(run.status))
    return end(
      deps,
      `run ${id}`,
      run,
      fields,
      exitCodes.pending,
      `is still ${run.status} after ${opts.timeout}`,
    )
  return end(deps, `run ${id}`, run, fields, exitCodes.failed, `ended ${run.status}, not ${target}`)
}

/** What a gate may be waited for: decided (any decision), or one decision. */
const gateTargets = ['decided', ...gateDecisions] as const

export async function waitGate(
  deps: Deps,
  ref: string,
  opts: WaitOptions,
  sleep = (ms: number) => new Promise((r) => setTimeout(r, ms)),
): Promise<void> {
  if (!(gateTargets as readonly string[]).includes(opts.for))
    throw new UsageError(`--for takes ${gateTargets.join(', ')}; got "${opts.for}"`)
  const timeout = opts.timeout === undefined ? undefined : parseDuration(opts.timeout)
  const id = await resolveId(deps.client(), 'gate', ref)
  const deadline = timeout === undefined ? Infinity : Date.now() + timeout * 1000
  let delay = 250
  for (;;) {
    let gate: Gate | undefined
    try {
      gate = await deps.client().get<Gate>(`/gates/${id}`)
    } catch (err) {
      // osd restarting: read again, until the deadline.
      if (!isPassing(err) || Date.now() + delay >= deadline) throw err
    }
    if (gate) {
      const fields: [string, unknown][] = [
        ['id', gate.id],
        ['status', gate.status],
        ['decision', gate.decision],
      ]
      if (gate.status === 'decided') {
        // A run that ends while it waits closes its gates with no decision (decidedBy `run
        // cancelled`, say): nobody decided, so not even --for=decided is reached; it ended otherwise.
        if (gate.decision === null)
          return end(
            deps,
            `gate ${id}`,
            gate,
            fields,
            exitCodes.failed,
            `was closed undecided: its run ended${gate.decidedBy ? ` (${gate.decidedBy})` : ''}, not ${opts.for}`,
          )
        const reached = opts.for === 'decided' || gate.decision === opts.for
        return end(
          deps,
          `gate ${id}`,
          gate,
          fields,
          reached ? exitCodes.ok : exitCodes.failed,
          `was decided ${gate.decision}, not ${opts.for}`,
        )
      }
      if (Date.now() >= deadline)
        return end(
          deps,
          `gate ${id}`,
          gate,
          fields,
          exitCodes.pending,
          `still waits after ${opts.timeout}`,
        )
    }
    await sleep(Math.max(0, Math.min(delay, deadline - Date.now())))
    delay = Math.min(2000, delay * 2)
  }
}

export function registerWait(program: Command, makeDeps: MakeDeps): void {
  const wait = program.command('wait').description(about.wait)
  const timeoutHelp = 'give up after this long (90, 90s, 10m, 1h): exit 8'
  examples(
    wait
      .command('run')
      .description(
        'wait until a run reaches --for (a status): exit 0, 1 if it ended otherwise first, 8 if the timeout passed first',
      )
      .argument('<id>', 'the run id, or its first 8+ characters')
      .requiredOption('--for <status>', `the status to wait for: ${runStatuses.join(', ')}`)
      .option('--timeout <duration>', timeoutHelp)
      .action(actionOf(makeDeps, waitRun)),
    'osctl wait run 3f1c... --for=succeeded --timeout 10m',
    'osctl wait run 3f1c... --for=waiting_on_gate --timeout 5m',
  )
  examples(
    wait
      .command('gate')
      .description(
        'wait until a gate is decided (--for decided) or decided one way: exit 0, 1 if decided otherwise or closed undecided by its run ending, 8 if the timeout passed first',
      )
      .argument('<id>', 'the gate id, or its first 8+ characters')
      .requiredOption('--for <decision>', `${gateTargets.join(', ')}`)
      .option('--timeout <duration>', timeoutHelp)
      .action(
        actionOf(makeDeps, (deps, id: string, opts: WaitOptions) => waitGate(deps, id, opts)),
      ),
    'osctl wait gate 9a2e... --for=approve --timeout 1h',
  )
}
