import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Chat, ChatDetail, ChatMessage, ChatToolGrant } from '../../../shared/schemas/chats.js'
import { Gate } from '../../../shared/schemas/gates.js'
import { RecallHealth } from '../../../shared/schemas/memory.js'
import { TaskRead } from '../../../shared/schemas/tasks.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'

// Chat replies in the engine (DESIGN 11; issue 18): the member replies through the real engine and SDKs
// against the fake provider; tool calls wait for the person's decision; os.ask_ceo opens a chat question;
// a create-task chat creates the task it proposes once allowed.

let t: TestApp
let fake: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine

beforeAll(async () => {
  fake = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
  await mcp?.close()
})

async function tenant({ keyless = false } = {}) {
  const { e, key, as, bind } = await keyedEnterprise(t, 'Chat', { keyless })
  const res = await t.call('POST', '/v1/members', {
    ...as,
    body: { name: `Grace ${randomUUID().slice(0, 6)}`, persona: 'You speak like a ship captain.' },
  })
  expect(res.status).toBe(201)
  const member = res.body as { id: string }
  const open = async (body: Record<string, unknown> = { memberId: member.id }) => {
    const opened = await t.call('POST', '/v1/chats', { ...as, body })
    expect(opened.status, JSON.stringify(opened.body)).toBe(201)
    return Chat.parse(opened.body)
  }
  const send = async (chatId: string, content: string, token = e.token) => {
    const sent = await t.call('POST', `/v1/chats/${chatId}/messages`, { token, body: { content } })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    return ChatMessage.parse(sent.body)
  }
  return { e, key, as, bind, member, open, send }
}

/** Follows the chat with the long-poll until `done` holds for its messages. */
async function follow(
  e: TestEnterprise,
  chatId: string,
  done: (detail: ChatDetail) => boolean,
  ms = 15_000,
): Promise<ChatDetail> {
  const deadline = Date.now() + ms
  for (;;) {
    const res = await t.call('GET', `/v1/chats/${chatId}`, { token: e.token })
    expect(res.status).toBe(200)
    const detail = ChatDetail.parse(res.body)
    if (done(detail)) return detail
    if (Date.now() > deadline) throw new Error(`chat never got there: ${JSON.stringify(detail)}`)
    const last = detail.messages.at(-1)!.id
    await t.call('GET', `/v1/chats/${chatId}?afterMessageId=${last}&waitSeconds=2`, {
      token: e.token,
    })
  }
}

const lastIs =
  (role: string, pred: (m: ChatMessage) => boolean = () => true) =>
  (d: ChatDetail) =>
    d.messages.at(-1)?.role === role && pred(d.messages.at(-1)!) && !d.replying
const waitingCall = (d: ChatDetail) =>
  d.messages.some((m) => m.toolCall?.status === 'waiting' && !m.question)

describe('a reply', () => {
  it('follows a message: persona, chatModelTier, priced, memory recalled, long-poll wakes', async () => {
    const s = await tenant()
    const tier = await t.call('PATCH', '/v1/enterprise/chat-model-tier', {
      ...s.as,
      body: { chatModelTier: 'economical' },
    })
    expect(tier.status, JSON.stringify(tier.body)).toBe(200)
    // An enterprise lesson (as a training run writes it): the reply recalls it.
    await t.sql`insert into memory_notes (enterprise_id, layer, text, source)
                values (${s.e.id}, 'enterprise', 'Zephyrco invoices need the PO number in the subject.', 'training')`
    fake.script(s.key, {
      text: 'Aye, the invoices sail tomorrow.',
      usage: { input: 1000, output: 200 },
    })
    const chat = await s.open()
    const sent = await s.send(chat.id, 'When do the Zephyrco invoices go out?')
    // The long-poll answers as soon as the reply is there.
    const started = Date.now()
    const waited = await t.call(
      'GET',
      `/v1/chats/${chat.id}?afterMessageId=${sent.id}&waitSeconds=10`,
      s.as,
    )
    expect(Date.now() - started).toBeLessThan(8000)
    const detail = ChatDetail.parse(waited.body)
    expect(detail.messages.map((m) => [m.role, m.content])).toEqual([
      ['member', 'Aye, the invoices sail tomorrow.'],
    ])
    const done = await follow(s.e, chat.id, lastIs('member'))
    expect(done.replying).toBe(false)
    const [request] = fake.callsWith(s.key)
    expect(request!.system).toContain('ship captain')
    // What memory recalled for the message is said with it, not in the system prompt: the system
    // stays the same at every turn, so the provider's cache keeps the conversation (DESIGN 13).
    expect(request!.system).not.toContain('PO number')
    const asked = request!.body.messages.at(-1)
    expect(asked.role).toBe('user')
    const said = (asked.content as { text: string }[]).map((b) => b.text).join('')
    expect(said).toMatch(
      /^When do the Zephyrco invoices go out\?\n\n# What the company has learned\n/,
    )
    expect(said).toContain('PO number')
    const tiers = (await t.call('GET', '/v1/llm/tiers', s.as)).body
    expect(request!.model).toBe(
      tiers.provider_a?.economical?.model ?? tiers.tiers?.provider_a?.economical?.model,
    )
    const [usage] = await t.sql<{ calls: number; costUsdMicros: number }[]>`
      select calls, cost_usd_micros from llm_usage where enterprise_id = ${s.e.id}`
    expect(usage!.calls).toBe(1)
    expect(Number(usage!.costUsdMicros)).toBeGreaterThan(0)
    const spent = await t.sql<{ layer: string; spentUsdMicros: number }[]>`
      select layer, spent_usd_micros from spend_days where enterprise_id = ${s.e.id} order by layer`
    expect(spent.map((r) => r.layer)).toEqual(['enterprise', 'member'])
    expect(spent.every((r) => Number(r.spentUsdMicros) === Number(usage!.costUsdMicros))).toBe(true)
    const health = RecallHealth.parse((await t.call('GET', '/v1/memory/recall-health', s.as)).body)
    expect(health.chats).toEqual({ attempted: 1, succeeded: 1, failed: 0 })
    // The next message is answered with the conversation so far.
    fake.script(s.key, { text: 'As I said.' })
    await s.send(chat.id, 'Sure?')
    await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'As I said.'),
    )
    const second = fake.callsWith(s.key)[1]!
    expect(JSON.stringify(second.body.messages)).toContain('the invoices sail tomorrow')
  })

  it('without a key says so in the chat, and replies once a key is bound', async () => {
    const s = await tenant({ keyless: true })
    const chat = await s.open()
    await s.send(chat.id, 'Anyone there?')
    const blocked = await follow(s.e, chat.id, (d) => d.messages.at(-1)?.role === 'member')
    expect(blocked.messages.at(-1)!.content).toMatch(/No model key/)
    fake.script(s.key, { text: 'Here now.' })
    await s.bind()
    await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Here now.'),
    )
  })
})

describe('spend caps (enterprise and member layers)', () => {
  for (const [layer, lift] of [
    ['member', 'raised'],
    ['enterprise', 'off'],
  ] as const) {
    it(`a ${layer} cap with no room holds the reply, which follows once the cap is ${lift === 'off' ? 'turned off' : lift}`, async () => {
      const s = await tenant()
      const cap = await t.call('PATCH', '/v1/spend/caps', {
        ...s.as,
        body: { layer, ...(layer === 'member' ? { layerId: s.member.id } : {}), moneyCentsDay: 0 },
      })
      expect(cap.status, JSON.stringify(cap.body)).toBe(200)
      fake.script(s.key, { text: 'Paid for at last.', usage: { input: 100, output: 10 } })
      const chat = await s.open()
      await s.send(chat.id, 'Are you there?')
      // The member says why it waits, and the reply is still to come (a new message is refused).
      const held = await follow(s.e, chat.id, (d) =>
        d.messages.some((m) => m.role === 'member' && /spend cap/.test(m.content)),
      )
      expect(held.replying).toBe(true)
      expect(held.messages.at(-1)!.content).toContain(
        `the ${layer} daily spend cap of $0.00 has no room`,
      )
      const [turn] = await t.sql<{ status: string }[]>`
        select status from chat_turns where chat_id = ${chat.id}`
      expect(turn!.status).toBe('paused_spend')
      expect(fake.callsWith(s.key)).toHaveLength(0)
      const again = await t.call('POST', `/v1/chats/${chat.id}/messages`, {
        ...s.as,
        body: { content: 'Hello?' },
      })
      expect(again.status).toBe(409)

      const lifted =
        lift === 'off'
          ? await t.call('PATCH', '/v1/spend/enabled', { ...s.as, body: { enabled: false } })
          : await t.call('PATCH', '/v1/spend/caps', {
              ...s.as,
              body: { layer, layerId: s.member.id, moneyCentsDay: 100_000 },
            })
      expect(lifted.status, JSON.stringify(lifted.body)).toBe(200)
      const done = await follow(
        s.e,
        chat.id,
        lastIs('member', (m) => m.content === 'Paid for at last.'),
      )
      expect(done.replying).toBe(false)
      expect(fake.callsWith(s.key)).toHaveLength(1)
      const days = await t.sql<
        { layer: string; reservedUsdMicros: number; spentUsdMicros: number }[]
      >`
        select layer, reserved_usd_micros, spent_usd_micros from spend_days
         where enterprise_id = ${s.e.id} order by layer`
      expect(days.map((d) => [d.layer, d.reservedUsdMicros, d.spentUsdMicros > 0])).toEqual([
        ['enterprise', 0, true],
        ['member', 0, true],
      ])
    })
  }
})

describe('an engine at its capacity (OSD_ENGINE_CONCURRENCY; issue 43)', () => {
  it('makes at most that many replies at once and leaves the rest unclaimed for another engine', async () => {
    // An engine once claimed every reply there was: a second engine idled beside it.
    await engine.stop()
    const narrow = await startTestEngine(t, { config: { ...t.config, engineConcurrency: 1 } })
    try {
      const s = await tenant()
      const answers = ['One.', 'Two.', 'Three.']
      fake.script(s.key, ...answers.map((text) => ({ text, delayMs: 1_000 })))
      const chats = [await s.open(), await s.open(), await s.open()]
      for (const chat of chats) await s.send(chat.id, 'Hello?')
      let most = 0
      let unclaimed = 0
      await eventually(
        async () => {
          const [now] = await t.sql<{ running: number; waiting: number; done: number }[]>`
            select count(*) filter (where status = 'running')::int as running,
                   count(*) filter (where status = 'pending' and lease_owner is null)::int as waiting,
                   count(*) filter (where status = 'done')::int as done
              from chat_turns where enterprise_id = ${s.e.id}`
          most = Math.max(most, now!.running)
          unclaimed = Math.max(unclaimed, now!.waiting)
          return now!.done === 3
        },
        20_000,
        'the three replies',
      )
      expect(most).toBe(1)
      expect(unclaimed).toBeGreaterThan(0)
      const last = await Promise.all(
        chats.map(async (chat) => {
          const res = await t.call('GET', `/v1/chats/${chat.id}`, s.as)
          return ChatDetail.parse(res.body).messages.at(-1)!.content
        }),
      )
      expect(last.sort()).toEqual([...answers].sort())
    } finally {
      await narrow.stop()
      engine = await startTestEngine(t)
    }
    // About 12 s on a loaded 2-core machine (two engines started and stopped, three replies in turn).
  }, 45_000)
})

describe('a turn taken over', () => {
  it('releases the reservation an interrupted model call left on it, also when the chat closed meanwhile', async () => {
    const s = await tenant()
    const chat = await s.open()
    const day = new Date().toISOString().slice(0, 10)
    // What an engine that died in the middle of a model call left behind.
    await t.sql`insert into spend_days (enterprise_id, day, layer, layer_id, reserved_usd_micros)
                values (${s.e.id}, ${day}, 'enterprise', ${s.e.id}, 5000),
                       (${s.e.id}, ${day}, 'member', ${s.member.id}, 5000)`
    await t.sql`update chats set status = 'closed', outcome = 'closed' where id = ${chat.id}`
    const [turn] = await t.sql<{ id: string }[]>`
      insert into chat_turns (enterprise_id, chat_id, status, lease_owner, lease_expires_at)
      values (${s.e.id}, ${chat.id}, 'running', 'dead-engine', now() - interval '1 second')
      returning id`
    await t.sql`insert into spend_reservations (id, enterprise_id, turn_id, day, micros, member_id)
                values (${randomUUID()}, ${s.e.id}, ${turn!.id}, ${day}, 5000, ${s.member.id})`
    engine.chats.wake()
    await eventually(async () => {
      const [now] = await t.sql<{ status: string; reservations: number }[]>`
        select status, (select count(*)::int from spend_reservations where turn_id = ${turn!.id}) as reservations
          from chat_turns where id = ${turn!.id}`
      return now?.status === 'done' && now.reservations === 0
    })
    const days = await t.sql<{ reservedUsdMicros: number }[]>`
      select reserved_usd_micros from spend_days where enterprise_id = ${s.e.id}`
    expect(days.map((d) => d.reservedUsdMicros)).toEqual([0, 0])
  })
})

describe('tool connections', () => {
  it("offers the connections of the roles its member holds, as runs do, never another role's (issue 51)", async () => {
    const s = await tenant()
    const role = async (name: string) => {
      const made = await t.call('POST', '/v1/roles', { ...s.as, body: { name } })
      expect(made.status, JSON.stringify(made.body)).toBe(201)
      return made.body as { id: string }
    }
    const held = await role(`Analyst ${randomUUID().slice(0, 6)}`)
    const notHeld = await role(`Auditor ${randomUUID().slice(0, 6)}`)
    const granted = await t.call('POST', `/v1/roles/${held.id}/members`, {
      ...s.as,
      body: { memberId: s.member.id },
    })
    expect(granted.status, JSON.stringify(granted.body)).toBe(201)
    for (const [name, layerId] of [
      ['sheets', held.id],
      ['ledger', notHeld.id],
    ] as const) {
      const bound = await t.call('POST', '/v1/tools/bindings', {
        ...s.as,
        body: { name, url: mcp.url, layer: 'role', layerId },
      })
      expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    }
    fake.script(s.key, { text: 'I can read your sheets.' })
    const chat = await s.open()
    await s.send(chat.id, 'What can you use?')
    await follow(s.e, chat.id, lastIs('member'))
    const offered: string[] = fake
      .callsWith(s.key)
      .at(-1)!
      .body.tools.map((tool: { name: string }) => tool.name)
    expect(offered).toContain('os__ask_ceo')
    expect(offered).toContain('sheets__echo')
    expect(offered.some((name) => name.startsWith('ledger__'))).toBe(false)
  })
})

describe('tool calls', () => {
  it('wait for the decision; allow runs once, deny refuses, always is the caller’s own', async () => {
    const s = await tenant()
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: s.member.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    const echo = (text: string) => ({ toolCalls: [{ name: 'vcs.echo', arguments: { text } }] })
    fake.script(s.key, echo('one'), { text: 'Echoed one.' })
    const chat = await s.open()
    await s.send(chat.id, 'Echo one')
    let detail = await follow(s.e, chat.id, waitingCall)
    const call = detail.messages.find((m) => m.toolCall)!
    expect(call.toolCall).toMatchObject({
      name: 'vcs.echo',
      arguments: { text: 'one' },
      status: 'waiting',
    })
    expect(detail.replying).toBe(true)
    expect(mcp.callsOf('echo')).toHaveLength(0)
    // A tool-call id of another chat is not this chat's.
    const other = await s.open()
    const wrong = await t.call('POST', `/v1/chats/${other.id}/tool-calls/${call.id}/decision`, {
      ...s.as,
      body: { decision: 'allow' },
    })
    expect(wrong.status).toBe(404)
    const allowed = await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${call.id}/decision`, {
      ...s.as,
      body: { decision: 'allow' },
    })
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(201)
    const again = await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${call.id}/decision`, {
      ...s.as,
      body: { decision: 'deny' },
    })
    expect(again.status).toBe(409)
    detail = await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Echoed one.'),
    )
    expect(detail.messages.find((m) => m.id === call.id)!.toolCall).toMatchObject({
      status: 'done',
      result: 'one',
    })
    expect(mcp.callsOf('echo').filter((c) => c.arguments.text === 'one')).toHaveLength(1)

    // Deny: the member is told, and goes on.
    fake.script(s.key, echo('two'), { text: 'Understood.' })
    await s.send(chat.id, 'Echo two')
    detail = await follow(s.e, chat.id, waitingCall)
    const denied = detail.messages.filter((m) => m.toolCall?.status === 'waiting').at(-1)!
    await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${denied.id}/decision`, {
      ...s.as,
      body: { decision: 'deny' },
    })
    detail = await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Understood.'),
    )
    expect(detail.messages.find((m) => m.id === denied.id)!.toolCall!.status).toBe('denied')
    expect(mcp.callsOf('echo').filter((c) => c.arguments.text === 'two')).toHaveLength(0)

    // Always: stored for this token; its next such call runs unasked.
    fake.script(s.key, echo('three'), { text: 'Three.' }, echo('four'), { text: 'Four.' })
    await s.send(chat.id, 'Echo three')
    detail = await follow(s.e, chat.id, waitingCall)
    const always = detail.messages.filter((m) => m.toolCall?.status === 'waiting').at(-1)!
    await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${always.id}/decision`, {
      ...s.as,
      body: { decision: 'always' },
    })
    await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Three.'),
    )
    const grants = (await t.call('GET', `/v1/chats/tool-grants?memberId=${s.member.id}`, s.as)).body
    expect(grants.map((g: unknown) => ChatToolGrant.parse(g).tool)).toEqual(['vcs.echo'])
    await s.send(chat.id, 'Echo four')
    detail = await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Four.'),
    )
    expect(
      detail.messages.filter((m) => m.toolCall?.arguments.text === 'four')[0]!.toolCall!.status,
    ).toBe('done')

    // Another token of the same enterprise is still asked.
    const [token] = await t.sql<
      { id: string }[]
    >`select id from api_tokens where enterprise_id = ${s.e.id}`
    expect(token).toBeDefined()
    const otherToken = await t.tokenWith(['chats:read', 'chats:write'], s.e)
    expect((await t.call('GET', '/v1/chats/tool-grants', { token: otherToken })).body).toEqual([])
    fake.script(s.key, echo('five'), { text: 'Five.' })
    await s.send(chat.id, 'Echo five', otherToken)
    detail = await follow(s.e, chat.id, waitingCall)
    expect(
      detail.messages.filter((m) => m.toolCall?.arguments.text === 'five')[0]!.toolCall!.status,
    ).toBe('waiting')
    expect(mcp.callsOf('echo').filter((c) => c.arguments.text === 'five')).toHaveLength(0)
  })

  it('os.ask_ceo opens a chat question; answering it lets the reply go on', async () => {
    const s = await tenant()
    fake.script(
      s.key,
      {
        toolCalls: [
          {
            name: 'os.ask_ceo',
            arguments: {
              questions: ['Red or blue?'],
              choices: [
                { key: 'red', label: 'Red' },
                { key: 'blue', label: 'Blue' },
              ],
            },
          },
        ],
      },
      { text: 'Blue it is.' },
    )
    const chat = await s.open()
    await s.send(chat.id, 'Paint the hull')
    const detail = await follow(s.e, chat.id, (d) =>
      d.messages.some((m) => m.question?.status === 'waiting'),
    )
    const asked = detail.messages.find((m) => m.question)!
    expect(asked.question).toMatchObject({ questions: ['Red or blue?'], status: 'waiting' })
    const gates = z.array(Gate).parse((await t.call('GET', '/v1/gates', s.as)).body)
    // The list tells a chat's question from a run's: it names the chat.
    expect(gates.find((g) => g.id === asked.question!.gateId)).toMatchObject({
      kind: 'question',
      chatId: chat.id,
      runId: null,
    })
    const answered = await t.call('POST', `/v1/gates/chat/${chat.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', choice: 'blue' },
    })
    expect(answered.status, JSON.stringify(answered.body)).toBe(201)
    const after = await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Blue it is.'),
    )
    expect(after.messages.find((m) => m.id === asked.id)!.question!.status).toBe('answered')
    const second = fake.callsWith(s.key)[1]!
    expect(JSON.stringify(second.body.messages)).toContain('blue')
  })
})

describe('closing a chat', () => {
  const askAndEcho = {
    toolCalls: [
      { name: 'os.ask_ceo', arguments: { questions: ['Port or starboard?'] } },
      { name: 'vcs.echo', arguments: { text: 'never' } },
    ],
  }

  it('a question is answered at its gate, never as a tool call; a must-gate tool is never allowed always', async () => {
    const s = await tenant()
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: s.member.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    fake.script(
      s.key,
      { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Merge #7?'] } }] },
      { toolCalls: [{ name: 'vcs.merge_pull_request', arguments: { number: 7 } }] },
      { text: 'Merged.' },
    )
    const chat = await s.open()
    await s.send(chat.id, 'Ship it')
    let detail = await follow(s.e, chat.id, (d) =>
      d.messages.some((m) => m.question?.status === 'waiting'),
    )
    const asked = detail.messages.find((m) => m.question)!
    expect(asked.toolCall).toBeNull()
    expect(asked.question).toMatchObject({ questions: ['Merge #7?'], answer: null })
    const wrong = await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${asked.id}/decision`, {
      ...s.as,
      body: { decision: 'allow' },
    })
    expect(wrong.status).toBe(409)
    expect(wrong.body).toMatchObject({
      error: 'use_gate_decision',
      gateId: asked.question!.gateId,
      route: `POST /v1/gates/chat/${chat.id}/decision`,
    })
    const answered = await t.call('POST', `/v1/gates/chat/${chat.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', note: 'yes' },
    })
    expect(answered.status, JSON.stringify(answered.body)).toBe(201)
    detail = await follow(s.e, chat.id, waitingCall)
    expect(detail.messages.find((m) => m.id === asked.id)!.question).toMatchObject({
      status: 'answered',
      answer: { decision: 'approve', note: 'yes' },
    })
    const merge = detail.messages.find((m) => m.toolCall?.status === 'waiting')!
    expect(merge.toolCall).toMatchObject({ name: 'vcs.merge_pull_request', mustGate: true })
    const always = await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${merge.id}/decision`, {
      ...s.as,
      body: { decision: 'always' },
    })
    expect(always.status).toBe(400)
    expect(always.body).toMatchObject({
      error: 'gate_required_for_tool',
      tool: 'vcs.merge_pull_request',
    })
    expect((await t.call('GET', '/v1/chats/tool-grants', s.as)).body).toEqual([])
    const allowed = await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${merge.id}/decision`, {
      ...s.as,
      body: { decision: 'allow' },
    })
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(201)
    await follow(
      s.e,
      chat.id,
      lastIs('member', (m) => m.content === 'Merged.'),
    )
  })

  it('closes its waiting question gate and its waiting tool calls; nothing of it runs', async () => {
    const s = await tenant()
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: s.member.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    fake.script(s.key, askAndEcho)
    const chat = await s.open()
    await s.send(chat.id, 'Which side?')
    const detail = await follow(s.e, chat.id, (d) =>
      d.messages.some((m) => m.question?.status === 'waiting'),
    )
    const gateId = detail.messages.find((m) => m.question)!.question!.gateId
    const waiting = (await t.call('GET', '/v1/gates', s.as)).body as { id: string }[]
    expect(waiting.map((g) => g.id)).toContain(gateId)
    const closed = await t.call('POST', `/v1/chats/${chat.id}/close`, s.as)
    expect(closed.status, JSON.stringify(closed.body)).toBe(200)
    const after = (await t.call('GET', '/v1/gates', s.as)).body as { id: string }[]
    expect(after.map((g) => g.id)).not.toContain(gateId)
    const gate = await t.call('GET', `/v1/gates/${gateId}`, s.as)
    expect(gate.body).toMatchObject({ status: 'decided', decidedBy: 'chat closed' })
    const read = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
    expect(read.replying).toBe(false)
    // The question is a question (no tool call of its own): answered by the closing, with no decision.
    const calls = read.messages.filter((m) => m.toolCall)
    expect(calls.map((m) => m.toolCall!.status)).toEqual(['denied'])
    const question = read.messages.find((m) => m.question)!
    expect(question.toolCall).toBeNull()
    expect(question.question).toMatchObject({ status: 'answered', answer: { decision: null } })
    // The closed chat's question cannot be answered any more, and nothing more is asked of the model.
    const answer = await t.call('POST', `/v1/gates/chat/${chat.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', gateId },
    })
    expect(answer.status).toBe(409)
    await new Promise((r) => setTimeout(r, 300))
    expect(fake.callsWith(s.key)).toHaveLength(1)
    expect(mcp.callsOf('echo').filter((c) => JSON.stringify(c).includes('never'))).toHaveLength(0)
  })

  it('a reply in progress when the chat closes stores nothing and makes no next model call', async () => {
    const s = await tenant()
    fake.script(
      s.key,
      { delayMs: 800, toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Late?'] } }] },
      { text: 'never said' },
    )
    const chat = await s.open()
    await s.send(chat.id, 'Take your time')
    const deadline = Date.now() + 5000
    while (fake.callsWith(s.key).length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20))
    expect(fake.callsWith(s.key)).toHaveLength(1)
    const closed = await t.call('POST', `/v1/chats/${chat.id}/close`, s.as)
    expect(closed.status).toBe(200)
    await new Promise((r) => setTimeout(r, 1500))
    expect(fake.callsWith(s.key)).toHaveLength(1)
    const read = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
    expect(read.messages.map((m) => m.role)).toEqual(['person'])
    expect(read.replying).toBe(false)
    const gates = await t.sql`select id from gates where chat_id = ${chat.id}`
    expect(gates).toHaveLength(0)
  })

  it('a create-task chat closing on allow or deny closes its waiting question gate', async () => {
    for (const decision of ['allow', 'deny'] as const) {
      const s = await tenant()
      const name = `Closing ${randomUUID().slice(0, 6)}`
      fake.script(s.key, {
        toolCalls: [
          { name: 'os.ask_ceo', arguments: { questions: ['Mondays?'] } },
          {
            name: 'os.create_task',
            arguments: {
              definition: { name, skillMd: 'Report weekly.', assigneeRole: 'ceo' },
            },
          },
        ],
      })
      const chat = await s.open({ purpose: 'create_task' })
      await s.send(chat.id, 'A weekly report')
      const detail = await follow(
        s.e,
        chat.id,
        (d) =>
          d.messages.some((m) => m.question?.status === 'waiting') &&
          d.messages.some(
            (m) => m.toolCall?.name === 'os.create_task' && m.toolCall.status === 'waiting',
          ),
      )
      const proposal = detail.messages.find((m) => m.toolCall?.name === 'os.create_task')!
      const gateId = detail.messages.find((m) => m.question)!.question!.gateId
      const decided = await t.call(
        'POST',
        `/v1/chats/${chat.id}/tool-calls/${proposal.id}/decision`,
        { ...s.as, body: { decision } },
      )
      expect(decided.status, JSON.stringify(decided.body)).toBe(201)
      const read = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
      expect(read.status).toBe('closed')
      const after = (await t.call('GET', '/v1/gates', s.as)).body as { id: string }[]
      expect(
        after.map((g) => g.id),
        decision,
      ).not.toContain(gateId)
      expect(read.messages.filter((m) => m.toolCall?.status === 'waiting')).toHaveLength(0)
    }
  })
})

describe('create-task chats', () => {
  const definition = (name: string) => ({
    name,
    skillMd: 'Send the weekly report to the board.',
    assigneeRole: 'ceo',
  })

  it('a refused definition goes back to the member; allow creates the task and closes applied', async () => {
    const s = await tenant()
    const name = `Weekly ${randomUUID().slice(0, 6)}`
    fake.script(
      s.key,
      { toolCalls: [{ name: 'os.create_task', arguments: { definition: { name: '' } } }] },
      { toolCalls: [{ name: 'os.create_task', arguments: { definition: definition(name) } }] },
    )
    const chat = await s.open({ purpose: 'create_task' })
    await s.send(chat.id, 'A weekly report to the board, please')
    const detail = await follow(s.e, chat.id, waitingCall)
    const calls = detail.messages.filter((m) => m.toolCall)
    expect(calls[0]!.toolCall!.status).toBe('failed')
    expect(calls[0]!.toolCall!.result).toMatch(/name/)
    const proposal = calls.at(-1)!
    const before = (await t.sql`select id from tasks where enterprise_id = ${s.e.id}`).length
    const allowed = await t.call(
      'POST',
      `/v1/chats/${chat.id}/tool-calls/${proposal.id}/decision`,
      {
        ...s.as,
        body: { decision: 'allow' },
      },
    )
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(201)
    const closed = Chat.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
    expect(closed).toMatchObject({ status: 'closed', outcome: 'applied' })
    const [task] = await t.sql<{ id: string; sourceChatId: string }[]>`
      select id, source_chat_id from tasks where enterprise_id = ${s.e.id} and name = ${name}`
    expect(task).toMatchObject({ id: closed.taskId, sourceChatId: chat.id })
    // The task's answer names the chat it came from; a task made otherwise names none.
    const read = await t.call('GET', `/v1/tasks/${task!.id}`, s.as)
    expect(read.status).toBe(200)
    expect(TaskRead.parse(read.body).sourceChatId).toBe(chat.id)
    expect((await t.sql`select id from tasks where enterprise_id = ${s.e.id}`).length).toBe(
      before + 1,
    )
    const plain = await t.call('POST', '/v1/tasks', { ...s.as, body: definition(`Plain ${name}`) })
    expect(plain.status, JSON.stringify(plain.body)).toBe(201)
    expect(TaskRead.parse(plain.body).sourceChatId).toBeNull()
  })

  it('deny closes it rejected, nothing created', async () => {
    const s = await tenant()
    const name = `Never ${randomUUID().slice(0, 6)}`
    fake.script(s.key, {
      toolCalls: [{ name: 'os.create_task', arguments: { definition: definition(name) } }],
    })
    const chat = await s.open({ purpose: 'create_task' })
    await s.send(chat.id, 'Something')
    const detail = await follow(s.e, chat.id, waitingCall)
    const proposal = detail.messages.find((m) => m.toolCall?.status === 'waiting')!
    await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${proposal.id}/decision`, {
      ...s.as,
      body: { decision: 'deny' },
    })
    const closed = Chat.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
    expect(closed).toMatchObject({ status: 'closed', outcome: 'rejected', taskId: null })
    expect(await t.sql`select id from tasks where name = ${name}`).toHaveLength(0)
  })
})

describe('prompt caching (issue 29; DESIGN 13)', () => {
  it("each reply reads the chat so far from the provider's cache; a turn's memory rides on its own message", async () => {
    const s = await tenant()
    // A persona long enough that the tools and system pass the provider's 1,024-token cache minimum.
    const persona = `You keep the harbour's books. ${'You reconcile each ledger line against the bank statement. '.repeat(90)}`
    const made = await t.call('POST', '/v1/members', {
      ...s.as,
      body: { name: `Ledger ${randomUUID().slice(0, 6)}`, persona },
    })
    expect(made.status).toBe(201)
    // Its tool server lists echo after the others: the tools go in name order all the same.
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: made.body.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    await t.sql`insert into memory_notes (enterprise_id, layer, text, source)
                values (${s.e.id}, 'enterprise', 'Zephyrco invoices need the PO number in the subject.', 'training')`
    const chat = await s.open({ memberId: made.body.id })
    const [connection] = (await t.call('GET', '/v1/llm/connections', s.as)).body
    const usage = async () => {
      const res = await t.call('GET', `/v1/llm/connections/${connection.id}/usage`, s.as)
      expect(res.status).toBe(200)
      return res.body.days[0] as {
        calls: number
        inputTokens: number
        cacheReadTokens: number
        cacheWriteTokens: number
        outputTokens: number
        costUsdCents: number
      }
    }
    const asked = ['When do the Zephyrco invoices go out?', 'And their credit notes?', 'Thank you.']
    const after: Awaited<ReturnType<typeof usage>>[] = []
    for (const [n, content] of asked.entries()) {
      fake.script(s.key, { text: `Reply ${n + 1}: the ledger says so, captain.` })
      await s.send(chat.id, content)
      await follow(
        s.e,
        chat.id,
        lastIs('member', (m) => m.content.startsWith(`Reply ${n + 1}`)),
      )
      after.push(await usage())
    }
    const requests = fake.callsWith(s.key)
    expect(requests).toHaveLength(3)
    // The tools and the system are the same at every turn, the system marked for the cache; the
    // newest message is marked too.
    expect(new Set(requests.map((r) => r.system)).size).toBe(1)
    for (const request of requests) {
      expect(request.body.tools.map((x: { name: string }) => x.name)).toEqual([
        'os__ask_ceo',
        'vcs__echo',
        'vcs__merge_pull_request',
        'vcs__open_pull_request',
      ])
      expect(request.system).not.toContain('PO number')
      expect(request.body.system[0].cache_control).toEqual({ type: 'ephemeral' })
      expect(request.body.messages.at(-1).content.at(-1).cache_control).toEqual({
        type: 'ephemeral',
      })
      expect(JSON.stringify(request.body).split('"cache_control"').length - 1).toBeLessThanOrEqual(
        4,
      )
    }
    // The first turn's memory went with its message, and only in that turn's call.
    const text = (m: { content: string | { text: string }[] }) =>
      typeof m.content === 'string' ? m.content : m.content.map((b) => b.text).join('')
    expect(text(requests[0]!.body.messages[0])).toContain('PO number')
    expect(text(requests[1]!.body.messages[0])).toBe('When do the Zephyrco invoices go out?')
    // What the usage list shows: the first reply writes the prompt to the cache; the second reads the
    // tools and system; the third reads them and the conversation before the second's question.
    const read = after.map((u) => u.cacheReadTokens)
    expect(after.map((u) => u.calls)).toEqual([1, 2, 3])
    expect(read[0]).toBe(0)
    expect(after[0]!.cacheWriteTokens).toBeGreaterThan(1024)
    expect(read[1]).toBeGreaterThan(1024)
    expect(read[2]! - read[1]!).toBeGreaterThan(read[1]!)
    // Each kind at its price (claude-sonnet-5-5: $3, $0.30, $3.75 and $15 per million), each call
    // rounded up to a micro-dollar.
    const last = after[2]!
    const exact =
      last.inputTokens * 3 +
      last.cacheReadTokens * 0.3 +
      last.cacheWriteTokens * 3.75 +
      last.outputTokens * 15
    const micros = Math.round(last.costUsdCents * 10_000)
    expect(micros).toBeGreaterThanOrEqual(Math.floor(exact))
    expect(micros).toBeLessThanOrEqual(Math.ceil(exact) + 3)
  })
})
