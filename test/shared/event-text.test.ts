import { randomUUID } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import type { Command } from 'commander'
import { describe, expect, it } from 'vitest'
import { buildProgram } from '../../cli/program.js'
import { eventCommand } from '../../shared/event-text.js'
import type { FeedEvent } from '../../shared/schemas/events.js'
import { composeMail, slackMessage, type MailItem } from '../../server/domain/events/index.js'

// The osctl commands osd suggests to people (issue 47): in a mail, a Slack message, a line of `osctl
// events follow`. A person copies them into a shell, so each must be the command it says and nothing
// more, whatever a model wrote into a gate (a choice's key comes from its os.ask_ceo call), and each
// must name a command osctl has.

const gateId = randomUUID()
const runId = randomUUID()
const subscriptionId = randomUUID()

function gateWaiting(payload: Record<string, unknown>): FeedEvent {
  return {
    position: 7,
    type: 'gate.waiting',
    createdAt: new Date().toISOString(),
    subject: { gateId, runId, taskSlug: 'ship' },
    payload,
  }
}

const question = (key: string) =>
  gateWaiting({ kind: 'question', questions: ['Ship?'], choices: [{ key, label: 'Yes' }] })

/** The commands in a suggestion: `osctl A   (or: osctl B)` is two. */
function commandsIn(text: string): string[] {
  return text
    .split(/\s+\((?:or|then): /)
    .map((part) => part.replace(/\)$/, ''))
    .filter((part) => part.startsWith('osctl '))
}

/**
 * What sh makes of `command`: the argv of each osctl it runs, and anything else it printed. osctl is
 * a function that prints its arguments, so nothing a command line holds reaches a real program but
 * `echo`, which the hostile keys below use to show that a second command ran.
 */
function asShellRunsIt(command: string): { argv: string[][]; other: string } {
  const res = spawnSync(
    'sh',
    ['-c', `osctl() { printf '<argv>'; printf '%s\\0' "$@"; printf '</argv>'; }\n${command}`],
    { encoding: 'utf8' },
  )
  const argv: string[][] = []
  const other = `${res.stdout.replace(/<argv>([^]*?)<\/argv>/g, (_, list: string) => {
    argv.push(list.split('\0').slice(0, -1))
    return ''
  })}${res.stderr}`
  return { argv, other }
}

const hostileKeys = [
  'yes; echo pwned',
  "it's $(echo pwned)",
  'a`echo pwned`b',
  "'; echo pwned; '",
  '<!channel> & <@U123>',
  '-x && echo pwned || echo pwned',
  '$HOME \\ " \\" ${PATH}',
]

describe('the osctl command of an event', () => {
  it.each(hostileKeys)('is one osctl command whose --choice is the key %j', (key) => {
    const command = eventCommand(question(key))!
    const { argv, other } = asShellRunsIt(command)
    expect(other).toBe('')
    expect(argv).toEqual([['gates', 'answer', gateId, '--choice', key]])
  })

  it('offers no key with a line break or a control character, and the form to answer instead', () => {
    for (const key of ['yes\necho pwned', 'ok\x1b[2J', 'a\u202eb']) {
      const command = eventCommand(question(key))!
      expect(command).toBe(`osctl gates answer ${gateId} --answer "..."`)
    }
  })

  it('keeps a plain key as it is', () => {
    expect(eventCommand(question('ship-it_v2'))).toBe(
      `osctl gates answer ${gateId} --choice ship-it_v2`,
    )
  })

  it('writes a hostile key inside a Slack code span with &, < and > escaped', () => {
    for (const key of hostileKeys) {
      const body = JSON.stringify(
        slackMessage(question(key), { publicUrl: undefined, enterpriseSlug: 'acme' }),
      )
      expect(body).not.toMatch(/<!channel>|<@U123>/)
      const message = JSON.parse(body) as { blocks: { text?: { text: string } }[] }
      const span = message.blocks
        .map((b) => b.text?.text ?? '')
        .join('\n')
        .match(/`([^`]*)`/)![1]!
      // Slack shows the entities as the characters: what a person copies is the command.
      const shown = span.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')
      const { argv, other } = asShellRunsIt(shown)
      expect(other).toBe('')
      expect(argv).toHaveLength(1)
      expect(argv[0]!.slice(0, 4)).toEqual(['gates', 'answer', gateId, '--choice'])
    }
  })
})

// --- every suggestion names a real command ------------------------------------------------------

const program = await buildProgram(() => {
  throw new Error('no command runs in this test')
})

/**
 * Why `argv` (after `osctl`) is not a command line osctl takes: a name that is no command, a command
 * that only groups others, an option its command does not have. Null when it is one.
 */
function notACommand(argv: string[]): string | null {
  let command: Command = program
  let at = 0
  for (; at < argv.length && !argv[at]!.startsWith('-'); at++) {
    const sub = command.commands.find(
      (c) => c.name() === argv[at] || c.aliases().includes(argv[at]!),
    )
    if (!sub) break
    command = sub
  }
  if (command === program) return `no command ${argv[0]}`
  if (command.commands.length > 0) return `${command.name()} needs a subcommand`
  const options = [...command.options, ...program.options]
  for (const word of argv.slice(at))
    if (word.startsWith('--') && !options.some((o) => o.long === word.split('=')[0]))
      return `${command.name()} has no ${word}`
  return null
}

describe('the osctl commands osd suggests', () => {
  const item = (kind: MailItem['kind'], subject: Record<string, unknown>, payload = {}) => ({
    id: 1,
    enterpriseId: randomUUID(),
    enterpriseName: 'Acme',
    kind,
    subject,
    payload,
    createdAt: new Date(),
  })
  const events: FeedEvent[] = [
    question('yes'),
    gateWaiting({ kind: 'question', questions: ['Why?'] }),
    gateWaiting({ kind: 'tool', tool: 'mail.send' }),
    {
      position: 8,
      type: 'run.failed',
      createdAt: new Date().toISOString(),
      subject: { runId, taskSlug: 'ship' },
      payload: { reason: 'no' },
    },
  ]
  const mail = composeMail([
    item(
      'gate',
      { gateId, runId, taskSlug: 'ship' },
      { kind: 'question', choices: [{ key: 'go' }] },
    ),
    item('run_failed', { runId, taskSlug: 'ship' }, { reason: 'no' }),
    item('subscription_disabled', { subscriptionId }, { position: 3, type: 'gate.waiting' }),
  ])
  const suggested = [
    ...events.flatMap((event) => commandsIn(eventCommand(event)!)),
    ...mail.text.split('\n').flatMap((line) => {
      const at = line.indexOf('osctl ')
      return at < 0 ? [] : commandsIn(line.slice(at))
    }),
  ]

  it.each(suggested)('names a real command: %s', (command) => {
    const { argv, other } = asShellRunsIt(command)
    expect(other).toBe('')
    expect(argv).toHaveLength(1)
    expect(notACommand(argv[0]!)).toBeNull()
  })

  it('tells how to enable a disabled subscription again with the real command', () => {
    expect(mail.text).toContain(`osctl subscriptions update ${subscriptionId} --enable`)
  })
})
