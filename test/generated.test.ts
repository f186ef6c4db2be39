import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { readGenerated, writeGenerated } from '../scripts/generated.js'

// The reference documents' check (docs/api.md, docs/osctl.md, docs/config-as-code.md) compares
// digests: it must still find a file the code no longer makes, and one edited by hand.
it('finds a made file current, and neither a stale one, an edited one nor one without its last line', async () => {
  const file = join(await mkdtemp(join(tmpdir(), 'osd-generated-')), 'ref.md')
  const rendered = '# Reference\n\n| a | bb |\n| --- | --- |\n| 1 | 2 |\n'
  await writeGenerated(file, 'docs:test', rendered, { proseWrap: 'preserve' })
  const made = await readFile(file, 'utf8')
  expect(made).toContain('| a   | bb  |') // formatted by prettier
  expect(await readGenerated(file, rendered)).toEqual({
    current: true,
    text: made.slice(0, made.indexOf('\n<!-- made by npm run docs:test')),
  })
  expect((await readGenerated(file, rendered.replace('2', '3'))).current).toBe(false)
  await writeFile(file, made.replace('| 1 ', '| 9 '))
  expect((await readGenerated(file, rendered)).current).toBe(false)
  await writeFile(file, made.slice(0, made.indexOf('<!--')))
  expect((await readGenerated(file, rendered)).current).toBe(false)
})
