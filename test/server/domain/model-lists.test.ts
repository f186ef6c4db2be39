import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import type { Provider } from '../../../shared/schemas/models.js'
import { bindKey, unbindKey, type ModelProvider } from '../../../server/domain/models/index.js'
import { modelListsKept, offeredModels } from '../../../server/domain/models/llm.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'

// The providers' own model lists a process keeps (server/domain/models/llm.ts), read by
// GET /v1/llm/models and by a task's spend.model: one per connection asked about, in a daemon that
// runs for months while enterprises come and go and keys are bound and unbound.

let t: TestApp

beforeAll(async () => {
  t = await createTestApp()
})

const clients = {
  provider_a: { listModels: async () => ['model-a-1', 'model-a-2'] },
  provider_b: { listModels: async () => ['model-b-1'] },
} as unknown as Record<Provider, ModelProvider>

describe("the providers' model lists", () => {
  it('are kept for so many connections at most, however many come and go', async () => {
    // Four enterprises at once, each binding a key, listing its models and unbinding it: a new
    // connection each time, 1,200 in all.
    const enterprises = await Promise.all(
      [1, 2, 3, 4].map((n) => t.createEnterprise(`Lists ${n} ${randomUUID().slice(0, 6)}`)),
    )
    await Promise.all(
      enterprises.map(async (e) => {
        for (let i = 0; i < 300; i++) {
          await bindKey(t.sql, t.sealer, e.id, {
            apiKey: `key-${i}`,
            provider: 'provider_a',
            layer: 'enterprise',
          })
          const models = await offeredModels(t.sql, t.sealer, e.id, clients)
          expect(models.map((m) => m.id)).toEqual(['model-a-1', 'model-a-2'])
          await unbindKey(t.sql, e.id, { provider: 'provider_a', layer: 'enterprise' })
        }
      }),
    )
    expect(modelListsKept()).toBeLessThanOrEqual(1_000)
    // 13.7 s on one core under the whole suite (taskset -c 0 npm test, issue 40): four times that.
  }, 60_000)
})
