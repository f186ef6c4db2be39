import type {
  MemoryAsk,
  MemoryLayer,
  RecallHealth,
  RecalledNote,
} from '../../../../shared/schemas/memory.js'
import { unflushedCommit, type Db, type Fragment, type Sql } from '../../../db/sql.js'
import { loadTask, loadVersion } from '../../tasks/index.js'
import { holds } from './rows.js'

// Recall (DESIGN 10): what a task reads of memory for a text. Its own notes, its team's and the
// enterprise's, active and holding (not past their validUntil), ranked by ts_rank over the text's words
// (memory_query in migration 0011: websearch_to_tsquery with its terms joined by or, so a goal recalls
// every note sharing a word with it and the notes sharing more rank higher), found through the GIN index
// on active notes by the text's rarer words on a large memory (memory_filter).
//
// Recall forgives typos (issue 31): a word of the text that is no lexeme of any note of the enterprise
// is stood in for by the most similar lexemes by trigram similarity (memory_typos, migrations 0023, 0026,
// pg_trgm; among the lexemes that begin with its letter): they find notes too, and rank by their
// full-text rank times their mean similarity, below a note that holds the words as written. Without
// pg_trgm nothing stands in and recall is full-text only. memory_search_terms (0027) says all of a text's terms.

/** How many notes a recall answers unless told. */
export const defaultRecallLimit = 10
export const maxRecallLimit = 50

interface RecalledRow {
  id: string
  layer: RecalledNote['layer']
  taskId: string | null
  teamId: string | null
  text: string
  kind: RecalledNote['kind']
  source: RecalledNote['source']
  score: number
}

/**
 * The search's terms for `text`, as the columns of one row (memory_search_terms, migration 0027):
 * `first` (recall's first filter, through the GIN index: the text's rarer words, each unknown word read
 * as its most similar lexeme, or'ed with the typo stand-ins few notes hold), `every` (the second
 * search's: every word and every stand-in), `query` (what ranks them), `fuzzy` and `weight` (the
 * stand-ins and their mean similarity; null when there are none).
 */
export function searchTerms(db: Db, enterpriseId: string, text: string): Fragment {
  return db`select * from memory_search_terms(${enterpriseId}, ${text})`
}

/** A note's score for the terms of `s`: its rank for the words as written, plus its stand-ins'. */
export const searchScore = (db: Db, alias = 'n'): Fragment =>
  db`(ts_rank(${db(alias)}.search, s.query)
      + coalesce(s.weight * ts_rank(${db(alias)}.search, s.fuzzy), 0))::float8`

/**
 * The best `take` notes of the scope for `text`, in one statement: found by the text's rarer words
 * (memory_filter leaves out the words most notes hold, migrations 0011, 0024, 0026), and only when
 * those find nothing, by every word (the second part runs only then: its condition is decided once).
 * With `count`, each note answered counts one more recall, in the same statement.
 */
function recall(
  db: Db,
  enterpriseId: string,
  text: string,
  scope: { taskId: string } | { teamId: string | null },
  take: number,
  count: boolean,
): Promise<RecalledRow[]> {
  // A task's notes, its team's and the enterprise's; a chat's, its member's team's and the enterprise's.
  const [task, from, where] =
    'taskId' in scope
      ? [
          db`t as materialized (select id, team_id from tasks where enterprise_id = ${enterpriseId} and id = ${scope.taskId}),`,
          db`s, t, memory_notes n`,
          db`(n.task_id = t.id or n.team_id = t.team_id or n.layer = 'enterprise')`,
        ]
      : [
          db``,
          db`s, memory_notes n`,
          db`(n.layer = 'enterprise' or (n.layer = 'team' and n.team_id = ${scope.teamId}::uuid))`,
        ]
  // The counts are statistics: on a pool (the statement its own transaction), its commit does not wait
  // for the WAL flush (unflushedCommit; a crash may lose a few counts). Waiting took 1.6 ms of a run's
  // 4.9 ms recall at its first start (bench:memory, issue 30). Inside a caller's transaction it would
  // decide for the caller's commit too: there the counts wait with it.
  const unflushed =
    typeof (db as Partial<Sql>).begin === 'function' ? db`returning ${unflushedCommit(db)}` : db``
  const found = (filter: 'first' | 'every', more: Fragment = db``) => db`
    select n.id, n.layer, n.task_id, n.team_id, n.text, n.kind, n.source, n.created_at,
           ${searchScore(db)} as score
      from ${from}
     where n.search @@ s.${db(filter)} and n.status = 'active' and n.enterprise_id = ${enterpriseId}
       and ${where} and ${holds(db)} ${more}
     order by score desc, n.created_at desc, n.id
     limit ${take}`
  return db<RecalledRow[]>`
    with s as materialized (${searchTerms(db, enterpriseId, text)}),
         ${task}
         first as materialized (${found('first')}),
         every as materialized (${found('every', db`and not exists (select 1 from first)`)}),
         found as (select * from first union all select * from every)
         ${count ? db`, counted as (update memory_notes set recalls = recalls + 1 where enterprise_id = ${enterpriseId} and id in (select id from found) ${unflushed})` : db``}
    select id, layer, task_id, team_id, text, kind, source, score from found
     order by score desc, created_at desc, id`
}

/**
 * The notes a run of `taskId` recalls for `text`, best first, read-only: what GET
 * /v1/tasks/{id}/memory/ask answers. A task not of the enterprise, or a text with no searchable word,
 * recalls nothing.
 */
export async function searchTaskNotes(
  db: Db,
  enterpriseId: string,
  taskId: string,
  text: string,
  limit = defaultRecallLimit,
  count = false,
): Promise<RecalledNote[]> {
  const take = Math.min(maxRecallLimit, Math.max(1, Math.trunc(limit) || defaultRecallLimit))
  const rows = await recall(db, enterpriseId, text, { taskId }, take, count)
  return rows.map((r) => ({ ...r, score: Number(r.score) }))
}

/**
 * What a run recalls at its start (the engine calls it with goal + input): searchTaskNotes, and each
 * note answered counts one more recall. Ask does not count: only runs (and chats) recall.
 */
export async function recallNotes(
  db: Db,
  enterpriseId: string,
  taskId: string,
  text: string,
  limit = defaultRecallLimit,
): Promise<RecalledNote[]> {
  return searchTaskNotes(db, enterpriseId, taskId, text, limit, true)
}

/**
 * What a chat reply recalls for the person's message (DESIGN 11): the notes of the member's team and the
 * enterprise's, best first, `limit` of them (chatMemoryDepth); each answered counts one more recall.
 */
export async function recallChatNotes(
  db: Db,
  enterpriseId: string,
  teamId: string | null,
  text: string,
  limit: number,
  count = true,
): Promise<RecalledNote[]> {
  const take = Math.min(maxRecallLimit, Math.max(1, Math.trunc(limit) || defaultRecallLimit))
  const rows = await recall(db, enterpriseId, text, { teamId }, take, count)
  return rows.map((r) => ({ ...r, score: Number(r.score) }))
}

/** GET /v1/tasks/{id}/memory/ask: the notes for `q`, or, without one, for the task's goal. */
export async function askTaskMemory(
  db: Db,
  enterpriseId: string,
  taskId: string,
  q: string | undefined,
  limit?: number,
): Promise<MemoryAsk> {
  const task = await loadTask(db, enterpriseId, taskId)
  let question = q?.trim() ? q : undefined
  if (question === undefined) {
    const version = await loadVersion(db, enterpriseId, task.currentVersionId)
    question = version?.definition.goal ?? ''
  }
  return { question, notes: await searchTaskNotes(db, enterpriseId, taskId, question, limit) }
}

/**
 * Recalls tried over the last 24 hours (spec: recall health window), from the run events the engine
 * writes at each llm run's start: memory.recalled, or memory.recall_failed; and from the chat turns,
 * each of which records whether its reply's recall succeeded.
 */
export async function recallHealth(db: Db, enterpriseId: string): Promise<RecallHealth> {
  const [row] = await db<{ succeeded: number; failed: number; since: Date }[]>`
    select count(*) filter (where type = 'memory.recalled')::int as succeeded,
           count(*) filter (where type = 'memory.recall_failed')::int as failed,
           now() - interval '24 hours' as since
      from run_events
     where enterprise_id = ${enterpriseId}
       and type in ('memory.recalled', 'memory.recall_failed')
       and created_at > now() - interval '24 hours'`
  const [chats] = await db<{ succeeded: number; failed: number }[]>`
    select count(*) filter (where recall = 'succeeded')::int as succeeded,
           count(*) filter (where recall = 'failed')::int as failed
      from chat_turns
     where enterprise_id = ${enterpriseId} and recall is not null
       and recalled_at > now() - interval '24 hours'`
  const { succeeded, failed, since } = row!
  return {
    since: since.toISOString(),
    runs: { attempted: succeeded + failed, succeeded, failed },
    chats: { attempted: chats!.succeeded + chats!.failed, ...chats! },
  }
}

/**
 * Notes by id, in the order given, of those still active: what a resumed run recalled at its first
 * start, read back (a note's text never changes; one tombstoned, superseded or expired since leaves).
 */
export async function activeNotesByIds(
  db: Db,
  enterpriseId: string,
  ids: readonly string[],
): Promise<{ id: string; layer: MemoryLayer; text: string }[]> {
  return db<{ id: string; layer: MemoryLayer; text: string }[]>`
    select n.id, n.layer, n.text
      from unnest(${db.array([...ids])}::uuid[]) with ordinality as r(id, ord)
      join memory_notes n on n.id = r.id
     where n.enterprise_id = ${enterpriseId} and n.status = 'active'
       and (n.valid_until is null or n.valid_until > now())
     order by r.ord`
}
