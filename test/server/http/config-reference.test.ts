import { describe, expect, it } from 'vitest'
import {
  configExamples,
  configReferenceFile,
  renderConfigReference,
} from '../../../scripts/config-reference.js'
import { readGenerated } from '../../../scripts/generated.js'
import { canonical } from '../../../server/domain/config/canonical.js'
import { parseDocuments } from '../../../server/domain/config/documents.js'
import { configApiVersion, configKinds, configSpecs } from '../../../shared/schemas/config.js'

// docs/config-as-code.md (issue 48): generated from the schemas the server checks documents with, and
// its examples are documents the server takes, written as an export writes them.

describe('docs/config-as-code.md', () => {
  it('is the reference the schemas make', async () => {
    const { current, text } = await readGenerated(
      configReferenceFile,
      await renderConfigReference(),
    )
    for (const kind of configKinds) expect(text).toContain(`### ${kind}\n`)
    expect(
      current,
      'docs/config-as-code.md is out of date with shared/schemas/config.ts: run `npm run docs:config`',
    ).toBe(true)
  })

  it('shows, for every kind, examples the server takes as an export would write them', () => {
    for (const kind of configKinds) {
      const examples = configExamples[kind]
      expect(examples.length, kind).toBeGreaterThan(0)
      const parsed = parseDocuments(
        examples.map((e) => ({ apiVersion: configApiVersion, kind, ...e })),
      )
      for (const [i, doc] of parsed.entries())
        expect(canonical(configSpecs[kind], doc.spec), `${kind} example ${i}`).toEqual(
          examples[i]!.spec,
        )
    }
  })
})
