import { createHash } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import prettier, { type Options } from 'prettier'

// A reference document a script makes (docs/api.md, docs/osctl.md, docs/config-as-code.md): prettier's
// formatting of what the script renders, then a last line naming a digest of each. A test holds the
// file to what the code makes now by rendering it again and comparing the digests, without formatting
// it again: prettier took 3-4 s of a core for docs/api.md alone, each time (issue 40). The second
// digest finds a file edited by hand since it was made.

/** The last line of a made file: `<!-- made by npm run X: rendered R, written W -->`. */
const trailer =
  /\n<!-- made by npm run ([\w:-]+): rendered ([0-9a-f]{16}), written ([0-9a-f]{16}) -->\n$/

const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16)

/** Writes `file`: `rendered` as prettier formats it (with `options`), and the trailer. */
export async function writeGenerated(
  file: string,
  script: string,
  rendered: string,
  options: Options,
): Promise<void> {
  const written = await prettier.format(rendered, { ...options, parser: 'markdown' })
  await writeFile(
    file,
    `${written}\n<!-- made by npm run ${script}: rendered ${digest(rendered)}, written ${digest(written)} -->\n`,
  )
}

/**
 * Whether `file` is what writeGenerated made of `rendered`, unedited since; and its text without the
 * trailer (for a test to read what a reader sees).
 */
export async function readGenerated(
  file: string,
  rendered: string,
): Promise<{ current: boolean; text: string }> {
  const content = await readFile(file, 'utf8').catch(() => '')
  const found = trailer.exec(content)
  if (!found) return { current: false, text: content }
  const text = content.slice(0, found.index)
  return { current: found[2] === digest(rendered) && found[3] === digest(text), text }
}
