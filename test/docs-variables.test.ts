import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { projectRoot } from '../shared/paths.js'

// Every variable osd reads is documented (issue 49 added the OpenTelemetry ones): each OSD_* and OTEL_*
// name the daemon's sources mention is in docs/configuration.md or docs/observability.md.

/** Names that are not variables osd reads: the prefix config-as-code makes key variables' names from. */
const notVariables = new Set(['OSD_MODEL_KEY'])

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  const nested = await Promise.all(
    entries.map((e) =>
      e.isDirectory()
        ? sources(join(dir, e.name))
        : e.name.endsWith('.ts')
          ? [join(dir, e.name)]
          : [],
    ),
  )
  return nested.flat()
}

describe('the variables osd reads', () => {
  it('are each documented in docs/configuration.md or docs/observability.md', async () => {
    const files = await sources(join(projectRoot, 'server'))
    const names = new Set<string>()
    for (const file of files)
      for (const [name] of (await readFile(file, 'utf8')).matchAll(
        /\b(?:OSD|OTEL)_[A-Z0-9_]*[A-Z0-9]\b/g,
      ))
        if (!notVariables.has(name)) names.add(name)
    const docs = (
      await Promise.all(
        ['configuration.md', 'observability.md'].map((f) =>
          readFile(join(projectRoot, 'docs', f), 'utf8'),
        ),
      )
    ).join('\n')
    expect([...names].filter((name) => !docs.includes(name))).toEqual([])
    expect(names).toContain('OTEL_EXPORTER_OTLP_ENDPOINT')
    expect(names).toContain('OSD_PORT')
  })
})
