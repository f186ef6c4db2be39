import { render } from 'ink-testing-library'
import { describe, expect, it } from 'vitest'
import { fold, jsonLines, resultLines } from '../../../cli/tui/fold.js'
import { Markdown, markdownRows } from '../../../cli/tui/markdown.js'

// Markdown as the chat screen draws a reply (NO_COLOR is set in tests: styles do not show in the
// frames, so these check what is left of the marks and how the text is laid out).

function drawn(text: string, width = 60): string {
  const ui = render(<Markdown text={text} width={width} />)
  const frame = ui.lastFrame() ?? ''
  ui.unmount()
  return frame
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
}

describe('Markdown', () => {
  it('draws headings, emphasis, inline code and links without their marks', () => {
    expect(
      drawn(
        '# Plan\n\nShip **long** and *careful* with `npm ci`, see [the docs](https://docs.example/x) or <https://a.example>.\n\n## Next\nA&amp;B',
      ),
    ).toBe(
      [
        'Plan',
        '',
        'Ship long and careful with npm ci, see the docs',
        '(https://docs.example/x) or https://a.example.',
        '',
        'Next',
        '',
        'A&B',
      ].join('\n'),
    )
  })

  it('draws lists, nested and ordered, with their marks and hanging indents', () => {
    expect(
      drawn(
        '1. First step\n2. Second step, which is long enough to wrap onto a next line here\n   - a detail\n   - [x] done\n   - [ ] to do\n\n- plain',
        40,
      ),
    ).toBe(
      [
        '1. First step',
        '2. Second step, which is long enough to',
        '   wrap onto a next line here',
        '   ◦ a detail',
        '   ◦ ☑ done',
        '   ◦ ☐ to do',
        '',
        '• plain',
      ].join('\n'),
    )
  })

  it('draws fenced code in a box with its language, and a quote with a bar', () => {
    expect(drawn('```ts\nconst a = 1\n  return a\n```\n\n> Quoted **words**\n> more', 30)).toBe(
      [
        `╭${'─'.repeat(28)}╮`,
        `│ ts${' '.repeat(25)}│`,
        `│ const a = 1${' '.repeat(16)}│`,
        `│   return a${' '.repeat(17)}│`,
        `╰${'─'.repeat(28)}╯`,
        '',
        '┃ Quoted words',
        '┃ more',
      ].join('\n'),
    )
  })

  it('draws an unclosed fence of a reply still being written as code so far', () => {
    expect(drawn('Here:\n\n```sh\nnpm ci\nnpm te', 20)).toBe(
      [
        'Here:',
        '',
        '╭──────────────────╮',
        '│ sh               │',
        '│ npm ci           │',
        '│ npm te           │',
        '╰──────────────────╯',
      ].join('\n'),
    )
  })

  it('draws a table with its header, and a rule', () => {
    expect(drawn('| Name | Count |\n|---|--:|\n| apples | 3 |\n\n---', 40)).toBe(
      ['Name     Count', '──────   ─────', 'apples   3', '', '─'.repeat(40)].join('\n'),
    )
  })

  it('counts the rows of a reply at least as many as it takes', () => {
    const text = '# Plan\n\nA paragraph.\n\n```\none\ntwo\n```\n\n- a\n- b'
    const rows = drawn(text, 40).split('\n').length
    expect(markdownRows(text, 40)).toBeGreaterThanOrEqual(rows)
    expect(markdownRows(text, 40)).toBeLessThanOrEqual(rows + 4)
  })
})

describe('folding', () => {
  it('pretty-prints JSON and folds it with a mark of how many lines are left out', () => {
    const lines = jsonLines({ repo: 'acme/web', files: ['a', 'b', 'c', 'd'] })
    expect(lines).toHaveLength(9)
    expect(fold(lines, 5)).toEqual([
      '{',
      '  "repo": "acme/web",',
      '  "files": [',
      '    "a",',
      '… 5 more lines',
    ])
    expect(fold(lines, 9)).toEqual(lines)
    expect(fold(['a', 'b', 'c'], 2)).toEqual(['a', '… 2 more lines'])
  })

  it('reads a result as JSON when it is, else as its text', () => {
    expect(resultLines('{"ok":true}')).toEqual(['{', '  "ok": true', '}'])
    expect(resultLines('merged acme/web#7\n')).toEqual(['merged acme/web#7'])
    expect(resultLines('{not json')).toEqual(['{not json'])
  })
})
