import { randomUUID } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { eventCommand } from '../../shared/event-text.js'
import type { FeedEvent } from '../../shared/schemas/events.js'
import { slackMessage } from '../../server/domain/events/index.js'

// The osctl commands osd suggests to people (issue 47): in a mail, a Slack message, a line of `osctl
// events follow`. A person copies them into a shell, so each must be the command it says and nothing
// more, whatever a model wrote into a gate (a choice's key comes from its os.ask_ceo call).

const gateId = randomUUID()
const runId = randomUUID()

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
