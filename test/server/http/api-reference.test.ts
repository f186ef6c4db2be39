import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { apiReferenceFile, renderApiReference } from '../../../scripts/api-reference.js'

// The whole OpenAPI document made and rendered: 6 s on CI, 18 s on one busy core, over 44 s once when a
// full run shared two cores with other work.
describe('docs/api.md', { timeout: 120_000 }, () => {
  it('is the reference the OpenAPI document makes', async () => {
    const written = await readFile(apiReferenceFile, 'utf8').catch(() => '')
    const fresh = await renderApiReference()
    expect(fresh).toContain('### GET /v1/chats/{id}/events')
    // The document's asterisks as written, not taken for emphasis.
    expect(fresh).toContain('runs:read for run.\\*, model.\\*, tool.\\*; gates:read for gate.\\*;')
    expect(fresh).toContain('`200` string (binary) (\\*/\\*)')
    // Compared as text, not with toEqual: a diff of thousands of lines says less than the fix does.
    expect(
      written === fresh,
      'docs/api.md is out of date with the routes: run `npm run docs:api`',
    ).toBe(true)
  })
})
