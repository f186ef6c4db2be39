import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../../server/config.js'
import { createChat, insertMessage, sendMessage } from '../../../server/domain/chats/index.js'
import { createMember } from '../../../server/domain/org/index.js'
import { cancelRun } from '../../../server/domain/runs/index.js'
import { createTask } from '../../../server/domain/tasks/index.js'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import { RunDetail } from '../../../shared/schemas/runs.js'
import { createTestEnterprise, type TestEnterprise } from '../../helpers/app.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { startOsd, type OsdProcess } from '../../helpers/processes.js'
import { apiStart } from '../../helpers/runs.js'

// The long-polls of a real `osd serve --role api` (DESIGN 5, 11; issue 43): answered by a change
// another process makes (this one, through the domain: its NOTIFY is the only way osd can hear of
// it), and cut short when osd stops, so a shutdown never waits out a client's waitSeconds.

let db: TestDatabase
let enterprise: TestEnterprise
/** A real osd serving the API alone: nothing in it moves a run or replies in a chat. */
let daemon: OsdProcess | undefined

beforeAll(async () => {
  db = await createTestDatabase()
  enterprise = await createTestEnterprise(db.sql, 'Long Poll', loadConfig({}, {}))
  daemon = await startOsd({ DATABASE_URL: db.url }, ['--role', 'api'])
})
afterAll(async () => {
  await daemon?.stop()
})

const get = (path: string) =>
  fetch(`${daemon!.url}${path}`, { headers: { authorization: `Bearer ${enterprise.token}` } })

/** A queued run (no engine runs it) and its newest event. */
async function queuedRun() {
  const taskId = await createTask(db.sql, enterprise.id, {
    name: `Poll ${Math.random().toString(36).slice(2, 8)}`,
    kind: 'deterministic',
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
  })
  const { run } = await apiStart(db.sql, enterprise.id, taskId, {})
  const [event] = await db.sql<{ id: string }[]>`
    select id from run_events where run_id = ${run.id} order by seq desc limit 1`
  return { run, afterEventId: event!.id }
}

/** A chat waiting for its member's reply (no engine makes it), and the person's message. */
async function waitingChat() {
  const member = await createMember(
    db.sql,
    enterprise.id,
    { name: `Polly ${Math.random().toString(36).slice(2, 8)}` },
    'osd.local',
  )
  const chat = await createChat(db.sql, enterprise.id, { memberId: member.id })
  const message = await sendMessage(db.sql, enterprise.id, chat.id, 'Anyone?', 'token:poll')
  return { chat, afterMessageId: message.id }
}

/**
 * Resolves once `daemon` has taken the requests sent before: its listening socket accepts in order, so
 * a request answered after them was accepted after them.
 */
async function taken(): Promise<void> {
  expect((await fetch(`${daemon!.url}/health/live`)).status).toBe(200)
}

// Up to 15 s each here with the daemon's start; three times that for a machine half as fast.
describe('a long-poll of a real osd', { timeout: 45_000 }, () => {
  it('is answered by a run event and a chat message another process commits', async () => {
    const { run, afterEventId } = await queuedRun()
    const { chat, afterMessageId } = await waitingChat()
    const runPoll = get(`/runs/${run.id}?afterEventId=${afterEventId}&waitSeconds=30`)
    const chatPoll = get(`/chats/${chat.id}?afterMessageId=${afterMessageId}&waitSeconds=30`)
    await taken()
    // Most likely their first reads are done and they wait; were they not, a first read after the
    // change finds it, and the answers are the same.
    await new Promise((r) => setTimeout(r, 300))

    const changedAt = Date.now()
    await cancelRun(db.sql, enterprise.id, run.id)
    await insertMessage(
      db.sql,
      { id: chat.id, enterpriseId: enterprise.id },
      { role: 'member', content: 'Here.' },
    )
    const runAnswer = await runPoll
    const chatAnswer = await chatPoll
    // Well before the 30 s either would wait for nothing.
    expect(Date.now() - changedAt).toBeLessThan(15_000)
    expect(runAnswer.status).toBe(200)
    expect(RunDetail.parse(await runAnswer.json()).events.map((e) => e.type)).toEqual([
      'run.cancelled',
    ])
    expect(chatAnswer.status).toBe(200)
    const detail = ChatDetail.parse(await chatAnswer.json())
    expect(detail.messages.map((m) => [m.role, m.content])).toEqual([['member', 'Here.']])
  })

  // The last test: it stops the daemon.
  it('answers at once when osd stops, and osd exits 0', async () => {
    const { run, afterEventId } = await queuedRun()
    const { chat, afterMessageId } = await waitingChat()
    const runPoll = get(`/runs/${run.id}?afterEventId=${afterEventId}&waitSeconds=30`)
    const chatPoll = get(`/chats/${chat.id}?afterMessageId=${afterMessageId}&waitSeconds=30`)
    await taken()
    await new Promise((r) => setTimeout(r, 300))

    const stoppingAt = Date.now()
    const exited = daemon!.stop()
    daemon = undefined
    const [runAnswer, chatAnswer] = await Promise.all([runPoll, chatPoll])
    expect(Date.now() - stoppingAt).toBeLessThan(15_000)
    expect(runAnswer.status).toBe(200)
    expect(RunDetail.parse(await runAnswer.json())).toMatchObject({
      run: { status: 'queued' },
      events: [],
    })
    expect(chatAnswer.status).toBe(200)
    expect(ChatDetail.parse(await chatAnswer.json())).toMatchObject({ messages: [] })
    expect(await exited).toBe(0)
  })
})
