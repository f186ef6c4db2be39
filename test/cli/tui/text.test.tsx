import { readFileSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { render } from 'ink-testing-library'
import { describe, expect, it } from 'vitest'
import { decodeEntities } from '../../../cli/tui/markdown.js'
import { screenText, Text } from '../../../cli/tui/text.js'
import { expectNoRawControls, hostile, hostileShown } from '../../helpers/hostile-text.js'

// The ink screens' one Text (issue 41): what they draw of the server's text shows its control
// characters escaped. The screens themselves: gate-review.test.tsx and chat.test.tsx ("hostile").

function drawn(node: React.ReactElement): string {
  const ui = render(node)
  const frame = ui.lastFrame() ?? ''
  ui.unmount()
  return frame
}

describe('Text', () => {
  it('draws its strings escaped, line breaks kept and a tab as two spaces', () => {
    const frame = drawn(
      <Text>
        {hostile}
        {'\n'}
        <Text bold>{`a\tb ${hostile}`}</Text> {42}
      </Text>,
    )
    expect(frame).toBe(`${hostileShown}\na  b ${hostileShown} 42`)
    expectNoRawControls(frame)
    expect(screenText('one\r\ntwo\tthree\x1b')).toBe('one\ntwo  three\\u001b')
  })

  it('decodes an entity that stands for a control character to its escape', () => {
    expect(decodeEntities('&#27;[2J &#x9b;31m &#x202E;x &amp;')).toBe(
      '\\u001b[2J \\u009b31m \\u202ex &',
    )
  })

  it('is the only Text the screens use: none takes it from ink', () => {
    const dir = resolve(import.meta.dirname, '../../../cli/tui')
    const inkText = readdirSync(dir)
      .filter((name) => /\.tsx?$/.test(name) && name !== 'text.tsx')
      .filter((name) =>
        /import\s*\{[^}]*\bText\b[^}]*\}\s*from\s*'ink'/.test(
          readFileSync(join(dir, name), 'utf8'),
        ),
      )
    expect(inkText).toEqual([])
  })
})
