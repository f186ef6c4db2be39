import { Lexer, type Token, type Tokens } from 'marked'
import { describe, expect, it } from 'vitest'
import { exportChat } from '../../cli/commands/chats.js'
import { UsageError } from '../../cli/errors.js'
import { ChatDetail } from '../../shared/schemas/chats.js'
import { readFixtures } from '../helpers/chat-recorder.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// osctl chats export, in process, over the real daemon's recorded chats (test/fixtures/chat): md is a
// markdown document a person reads (checked by reading it back with marked's lexer), json the API's
// detail unchanged.

process.env.TZ = 'UTC'
const fixtures = readFixtures()
const detail = (name: string) => ChatDetail.parse(fixtures[name])

/** One chat holding the recorded scenes one after another: a reply, a call, a question, a notice. */
function transcript(): ChatDetail {
  const base = detail('tool-call-done')
  return {
    ...base,
    messages: [
      ...detail('reply').messages,
      ...base.messages,
      ...detail('question-answered').messages,
      ...detail('must-gate-waiting').messages.slice(1),
      ...detail('notice').messages.slice(1),
    ],
  }
}

function run(chat: ChatDetail, opts: { format?: string } = {}, json = false) {
  const api = new FakeApi((req) =>
    req.path === '/members'
      ? { body: [{ id: chat.memberId, name: 'Grace', email: 'grace@acme.example' }] }
      : { body: chat },
  )
  const out = fakeDeps(api, { json })
  return { api, done: exportChat(out.deps, chat.id, opts), stdout: out.stdout }
}

const blocks = (md: string): Token[] =>
  new Lexer({ gfm: true }).lex(md).filter((t) => t.type !== 'space')

describe('osctl chats export', () => {
  it('writes md: a heading, each message with its time and speaker, calls, answers, notices', async () => {
    const chat = transcript()
    const { api, done, stdout } = run(chat)
    await done
    expect(api.sent[0]).toMatchObject({ method: 'GET', path: `/chats/${chat.id}`, query: {} })
    const md = stdout()
    expect(md.split('\n').slice(0, 8)).toEqual([
      '# Chat with Grace',
      '',
      `- Chat: \`${chat.id}\``,
      `- Member: Grace (\`${chat.memberId}\`)`,
      '- Status: open',
      '- Started: 2026-03-02 11:03',
      `- Messages: ${chat.messages.length}`,
      '',
    ])
    expect(md).toContain(
      '### 2026-03-02 11:02 · Grace\n\n> # Plan\n>\n> Ship the **login fix** first',
    )
    expect(md).toContain(
      [
        '### 2026-03-02 11:05 · Grace (tool call)',
        '',
        '**Tool call** `vcs.open_pull_request`',
        '',
        '- Decision: allowed',
        '- Status: done',
        '',
        '```json',
        '{',
        '  "repo": "acme/web",',
        '  "title": "Fix the login"',
        '}',
        '```',
        '',
        'Result:',
        '',
        '```text',
        'opened acme/web#1',
        '```',
      ].join('\n'),
    )
    expect(md).toContain(
      [
        '**Question**',
        '',
        '1. Which day should it ship?',
        '',
        'Choices:',
        '',
        '- `fri`: Friday',
        '- `mon`: Monday',
        '',
        '**Answer:**',
        '',
        '- Choice: Monday (`mon`)',
        '- Answer: after the standup',
      ].join('\n'),
    )
    expect(md).toContain(
      '**Tool call** `vcs.merge_pull_request` (on a must-gate list: decided each time)',
    )
    expect(md).toContain('- Decision: not decided yet')
    expect(md).toMatch(/### \d{4}-\d\d-\d\d \d\d:\d\d · osd\n\n\*I cannot reply yet: No model key/)
    expect(md).not.toContain('Which day should it ship?\n\n1. Which day') // the question once

    // Valid markdown: read back, one h1, an h3 per message, the member's own heading kept inside its
    // quote, the arguments and results as fenced code.
    const tokens = blocks(md)
    const headings = tokens.filter((t): t is Tokens.Heading => t.type === 'heading')
    expect(headings.filter((h) => h.depth === 1).map((h) => h.text)).toEqual(['Chat with Grace'])
    expect(headings.filter((h) => h.depth === 3)).toHaveLength(chat.messages.length)
    const quote = tokens.find(
      (t) => t.type === 'blockquote' && t.raw.includes('# Plan'),
    ) as Tokens.Blockquote
    expect(quote.tokens.map((t) => t.type)).toContain('heading')
    const code = tokens.filter((t): t is Tokens.Code => t.type === 'code')
    expect(code.map((c) => c.lang)).toEqual(['json', 'text', 'json'])
    expect(JSON.parse(code[0]!.text)).toEqual({ repo: 'acme/web', title: 'Fix the login' })
  })

  it('marks a reply the person stopped (issue 51)', async () => {
    const chat = detail('reply')
    const reply = chat.messages.at(-1)!
    chat.messages[chat.messages.length - 1] = { ...reply, content: 'Ship the fix', stopped: true }
    const { done, stdout } = run(chat)
    await done
    expect(stdout()).toMatch(/· Grace\n\n> Ship the fix\n\n\*\(stopped\)\*\n/)
  })

  it('fences a result longer than any backtick run in it', async () => {
    const chat = detail('tool-call-done')
    const call = chat.messages.find((m) => m.toolCall)!
    call.toolCall!.result = 'see ```sh\nrm -rf /\n```'
    const { done, stdout } = run(chat)
    await done
    const code = blocks(stdout()).filter((t): t is Tokens.Code => t.type === 'code')
    expect(code.at(-1)!.text).toBe('see ```sh\nrm -rf /\n```')
  })

  it('writes json: the API detail unchanged; --json alone means json too', async () => {
    const chat = detail('question-answered')
    const json = run(chat, { format: 'json' })
    await json.done
    expect(ChatDetail.parse(JSON.parse(json.stdout()))).toEqual(chat)
    const global = run(chat, {}, true)
    await global.done
    expect(JSON.parse(global.stdout())).toEqual(chat)
  })

  it('refuses another format before asking the daemon', async () => {
    const { api, done } = run(detail('reply'), { format: 'html' })
    await expect(done).rejects.toBeInstanceOf(UsageError)
    await expect(done).rejects.toThrow('--format takes md or json; got "html"')
    expect(api.sent).toHaveLength(0)
  })
})
