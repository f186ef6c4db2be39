import { notifyAfterCommit, onCommit, type Db } from '../db/sql.js'

// What wakes the engines (DESIGN 3, 5: a notification is a hint; every engine also sweeps).

/**
 * NOTIFY channel of what gives an engine work: a run made, moved or taken over (the payload is its id),
 * or a change that lets waiting runs go (no payload). Apart from the run events' channel so that a run's
 * progress events (each model and tool call) wake no engine.
 */
export const engineChannel = 'osd_engine'

/** Engines of this process, told at the commit itself (listenLocally). */
const local = new Set<(payload: string) => void>()

/**
 * Hears what wakes engines from this process's own commits at once, before their NOTIFY has gone to
 * PostgreSQL and come back (a round trip an API start in `osd serve` would otherwise wait for). The
 * NOTIFY still goes, for the other processes, and comes back here too. Answers how to stop.
 */
export function listenLocally(wake: (payload: string) => void): () => void {
  local.add(wake)
  return () => local.delete(wake)
}

/** Wakes every engine once what `db` wrote commits, for the runs `payloads` names (or '' for none). */
export function wakeEnginesFor(db: Db, payloads: readonly string[]): void {
  if (payloads.length === 0) return
  notifyAfterCommit(db, engineChannel, payloads)
  if (local.size > 0)
    onCommit(db, () => {
      for (const wake of local) for (const payload of payloads) wake(payload)
    })
}

/**
 * Wakes every engine once what `db` wrote commits, for a change that may let waiting runs go on: a
 * concurrentRunLimit raised, a role given to a member. Without it they would wait for the sweep.
 */
export function wakeEngines(db: Db): void {
  wakeEnginesFor(db, [''])
}
