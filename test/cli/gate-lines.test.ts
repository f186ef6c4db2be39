import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { getGate, listGates, toolCall } from '../../cli/commands/gates.js'
import { deciderText } from '../../cli/decisions.js'
import { formatEvent } from '../../cli/events.js'
import { Gate } from '../../shared/schemas/gates.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// What `osctl gates list` and `gates get` say of a gate (issue 51 item 10): its tool with the argument
// that says what the call does, the run it belongs to, and who decided it by name, not by id. In
// process, over gates held to the shared schema; the daemon's side is test/cli/gates.test.ts and
// test/server/engine/gates.test.ts.

const at = '2026-11-22T09:30:00.000Z'
const tokenId = randomUUID()
const userId = randomUUID()

function gate(fields: Partial<Gate> = {}): Gate {
  return Gate.parse({
    id: randomUUID(),
    kind: 'tool',
    status: 'waiting',
    tool: 'os.mail_send',
    arguments: { body: 'Hello', subject: 'Invoice', to: 'ada@example.com' },
    owner: 'ceo',
    approval: 'specific',
    summary: 'Send the invoice',
    choices: null,
    questions: null,
    runId: randomUUID(),
    chatId: null,
    taskId: randomUUID(),
    taskSlug: 'invoicing',
    decision: null,
    note: null,
    answers: null,
    choice: null,
    decidedBy: null,
    decidedByName: null,
    decidedAt: null,
    createdAt: at,
    ...fields,
  })
}

describe('toolCall', () => {
  it("shows the recipient of os.mail_send, whatever the arguments' order", () => {
    expect(toolCall(gate())).toBe('os.mail_send to=ada@example.com')
  })

  it('shows a telling argument of another tool, else its first string argument', () => {
    const args = { number: 7, title: 'Fix the build', repo: 'acme/site' }
    expect(toolCall({ tool: 'vcs.merge_pull_request', arguments: args })).toBe(
      'vcs.merge_pull_request repo=acme/site',
    )
    expect(toolCall({ tool: 'crm.note', arguments: { id: 4, text: 'call back' } })).toBe(
      'crm.note text="call back"',
    )
    expect(toolCall({ tool: 'crm.ping', arguments: { id: 4 } })).toBe('crm.ping')
    expect(toolCall({ tool: 'os.ask_ceo', arguments: null })).toBe('os.ask_ceo')
    expect(toolCall({ tool: null, arguments: null })).toBeNull()
  })

  it("escapes the model's control characters, then cuts the argument to fit", () => {
    const to = `\x1b[2J\u202eada@example.com${'x'.repeat(80)}`
    const shown = toolCall({ tool: 'os.mail_send', arguments: { to } })!
    expect(shown).toMatch(/^os\.mail_send to=\\u001b\[2J\\u202eada@example\.comx+…$/)
    expect(shown.length).toBe('os.mail_send '.length + 40)
    expect(shown).not.toMatch(/[\x00-\x1f\x7f-\x9f\u202a-\u202e]/)
    const key = toolCall({ tool: 'x.y', arguments: { ['k'.repeat(100)]: 'v' } })!
    expect(key).toBe(`x.y ${'k'.repeat(39)}…`)
  })
})

describe('gates list', () => {
  it('shows the tool with its key argument and the run, on a pipe and fitted on a terminal', async () => {
    const g = gate()
    const pipe = fakeDeps(new FakeApi(() => ({ body: [g] })))
    await listGates(pipe.deps, {})
    const [header, row] = pipe.stdout().split('\n')
    expect(header).toMatch(/^ID\s+TASK\s+KIND\s+TOOL\s+RUN\s+ASKS\s+CREATED$/)
    expect(row).toContain(`os.mail_send to=ada@example.com  ${g.runId}  Send the invoice`)

    // On a terminal the run by its first 8 characters, so the call keeps its room beside the gate's
    // id; on a narrower one the call gives way as any cell does, the ids whole.
    for (const [columns, call] of [
      [130, 'os.mail_send to=ada@example.com'],
      [100, 'os.mail_sen…'],
    ] as const) {
      const terminal = fakeDeps(new FakeApi(() => ({ body: [g] })), { tty: true, columns })
      await listGates(terminal.deps, {})
      const line = terminal.stdout().split('\n')[1]!
      expect(line.length).toBeLessThanOrEqual(columns)
      expect(line).toContain(`${g.id}  invoicing  tool  ${call}  ${g.runId!.slice(0, 8)}  `)
    }
  })

  it('names who decided with --status decided: a token by its name, a person by theirs', async () => {
    const decided = (decidedBy: string, decidedByName: string | null) =>
      gate({ status: 'decided', decision: 'approve', decidedBy, decidedByName, decidedAt: at })
    const f = fakeDeps(
      new FakeApi(() => ({
        body: [
          decided(`token:${tokenId}`, 'ci-bot'),
          decided(`user:${userId}`, 'Ada Lovelace'),
          decided('webhook', null),
        ],
      })),
    )
    await listGates(f.deps, { status: 'decided' })
    const out = f.stdout()
    expect(out).toMatch(/\s+DECISION\s+BY\s+DECIDED$/m)
    expect(out).toMatch(/\sapprove\s+ci-bot \(token\)\s+2026/)
    expect(out).toMatch(/\sapprove\s+Ada Lovelace\s+2026/)
    expect(out).toMatch(/\sapprove\s+webhook\s+2026/)
    expect(out).not.toContain(tokenId)
    expect(out).not.toContain(userId)
  })
})

describe('who decided', () => {
  it('gates get says the name; an osd that answers none leaves the id', async () => {
    const named = gate({
      status: 'decided',
      decision: 'reject',
      note: 'not now',
      decidedBy: `token:${tokenId}`,
      decidedByName: 'ci-bot',
      decidedAt: at,
    })
    const f = fakeDeps(new FakeApi(() => ({ body: named })))
    await getGate(f.deps, named.id)
    expect(f.stdout()).toMatch(/^decided by\s+ci-bot \(token\)$/m)

    const { decidedByName: _, ...older } = named
    const o = fakeDeps(new FakeApi(() => ({ body: older })))
    await getGate(o.deps, named.id)
    expect(o.stdout()).toMatch(new RegExp(`^decided by\\s+token:${tokenId}$`, 'm'))

    expect(deciderText(`user:${userId}`, 'ada@example.com')).toBe('ada@example.com')
    expect(deciderText('run cancelled', null)).toBe('run cancelled')
    expect(deciderText(null, null)).toBeNull()
  })

  it("the gate.decided event line says the name, escaped as the server's text", () => {
    const line = formatEvent(
      {
        id: randomUUID(),
        type: 'gate.decided',
        createdAt: at,
        payload: {
          gateId: 'g1',
          decision: 'approve',
          decidedBy: `token:${tokenId}`,
          decidedByName: 'ci\x1b[2J-bot',
        },
      },
      { isTTY: false },
    )
    expect(line).toMatch(
      /gate\.decided\s+gateId=g1 decision=approve decidedBy="ci\\u001b\[2J-bot \(token\)"$/,
    )
    expect(line).not.toContain(tokenId)
  })
})
