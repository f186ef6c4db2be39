import { notifyAfterCommit, type Db } from '../db/sql.js'

// What wakes the engines (DESIGN 3, 5: a notification is a hint; every engine also sweeps).

/**
 * NOTIFY channel of what gives an engine work: a run made, moved or taken over (the payload is its id),
 * or a change that lets waiting runs go (no payload). Apart from the run events' channel so that a run's
 * progress events (each model and tool call) wake no engine.
 */
export const engineChannel = 'osd_engine'

/**
 * Wakes every engine once what `db` wrote commits, for a change that may let waiting runs go on: a
 * concurrentRunLimit raised, a role given to a member. Without it they would wait for the sweep.
 */
export function wakeEngines(db: Db): void {
  notifyAfterCommit(db, engineChannel, [''])
}
