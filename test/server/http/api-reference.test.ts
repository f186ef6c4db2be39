import { describe, expect, it } from 'vitest'
import { apiReferenceFile, renderApiReference } from '../../../scripts/api-reference.js'
import { readGenerated } from '../../../scripts/generated.js'

// The whole OpenAPI document made and rendered, compared by digest with what docs:api wrote
// (scripts/generated.ts): prettier is not run again.
describe('docs/api.md', () => {
  it('is the reference the OpenAPI document makes', async () => {
    const { current, text } = await readGenerated(apiReferenceFile, await renderApiReference())
    expect(text).toContain('### GET /v1/chats/{id}/events')
    // The document's asterisks as written, not taken for emphasis by prettier.
    expect(text).toContain('runs:read for run.\\*, model.\\*, tool.\\*; gates:read for gate.\\*;')
    expect(text).toContain('`200` string (binary) (\\*/\\*)')
    expect(current, 'docs/api.md is out of date with the routes: run `npm run docs:api`').toBe(true)
  })
})
