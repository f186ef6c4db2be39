import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LlmPrices } from '../../shared/schemas/models.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'

// A local model through osctl, as the README's first team sets one up (issue 51): any key binds, the
// model osd has no price for runs at $0 under a spend cap, and what osctl prints of its cost, spend
// and usage says "unpriced" until `osctl llm prices set` prices it. The fake provider stands in for
// the local server at OSD_PROVIDER_B_BASE_URL; osctl runs in process (issue 28).

let fake: FakeModelProvider
let env: Record<string, string>
let json: CliDaemon['json']

const finish = {
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'Done.' } }],
  usage: { input: 1000, output: 500 },
}

beforeAll(async () => {
  fake = await startFakeModelProvider()
  const cli = await startCliDaemon('Local Cli', {
    OSD_SECRET_KEY: randomBytes(32).toString('hex'),
    OSD_PROVIDER_B_BASE_URL: fake.url,
  })
  env = cli.env
  json = cli.json
})
afterAll(async () => {
  await fake?.close()
})

async function ok(args: string[], input?: string) {
  const res = await osctl(args, env, input)
  expect(res.exitCode, `${args.join(' ')}: ${res.stderr}`).toBe(0)
  return res
}

describe('a local model in osctl', () => {
  it('binds any key, runs unpriced under a cap of 0, and says unpriced until priced', async () => {
    const bound = await ok(
      ['llm', 'bindings', 'set', '--provider', 'provider_b', '--key-stdin'],
      'ok\n',
    )
    expect(bound.stdout).toBe('provider_b key … connected on the enterprise\n')
    await ok([
      'llm',
      'tiers',
      'override',
      '--provider',
      'provider_b',
      '--tier',
      'mid',
      '--model',
      'llama3.2',
    ])
    await ok(['spend', 'caps', 'set', '--layer', 'enterprise', '--cents', '0'])
    await ok([
      'tasks',
      'create',
      '-d',
      JSON.stringify({ name: 'Local report', assigneeRole: 'ceo', overlapPolicy: 'os' }),
    ])

    fake.script('ok', finish)
    const waited = await osctl(['runs', 'start', 'local-report', '--wait'], env, undefined, {
      terminal: true,
    })
    expect(waited.exitCode, waited.output).toBe(0)
    expect(waited.stdout).toMatch(/^status\s+succeeded$/m)
    expect(waited.stdout).toMatch(/^cost\s+unpriced$/m)
    const runId = /^run\s+(\S+) \(local-report\)$/m.exec(waited.stdout)![1]!
    expect((await ok(['runs', 'get', runId])).stdout).toMatch(/^cost\s+unpriced$/m)

    const spend = (await ok(['spend'])).stdout
    expect(spend).toMatch(/^enterprise\s+-\s+unpriced\s+1$/m)
    expect(spend).toMatch(/^enterprise\s+-\s+\$0\.00\/day\s+unpriced$/m)
    const [connection] = await json(['llm', 'connections', 'list'])
    const usage = (await ok(['llm', 'connections', 'usage', connection.id])).stdout
    expect(usage).toMatch(/\sllama3\.2\s+1\s+1000\s+0\s+0\s+500\s+unpriced$/m)

    // What a model with no price costs on each provider, then a price of the enterprise's own.
    const list = (await ok(['llm', 'prices'])).stdout
    expect(list).toMatch(/^claude-sonnet-5-5\s+list \(provider_a\)\s+\$3\.00\s+\$15\.00\s+-\s+-$/m)
    expect(list).toContain(
      'a provider_b model with no price: unpriced, at $0.00 (the operator set its address); set one with osctl llm prices set\n',
    )
    expect(list).toContain(
      'a provider_a model with no price: priced as claude-opus-5-5, its frontier model\n',
    )
    const set = await ok([
      'llm',
      'prices',
      'set',
      '--model',
      'llama3.2',
      '--input',
      '1',
      '--output',
      '2',
    ])
    expect(set.stdout).toBe(
      'llama3.2: $1.00 input, $2.00 output per million tokens, from its next call\n',
    )
    const prices = LlmPrices.parse(await json(['llm', 'prices', 'list']))
    expect(prices.prices.find((p) => p.model === 'llama3.2')).toMatchObject({
      source: 'enterprise',
      input: 1,
      output: 2,
    })
    expect((await ok(['llm', 'prices'])).stdout).toMatch(
      /^llama3\.2\s+enterprise\s+\$1\.00\s+\$2\.00\s+-\s+-$/m,
    )

    // Priced now, the same task meets the cap of 0; raised, it runs and costs what the price says.
    await ok(['spend', 'caps', 'set', '--layer', 'enterprise', '--cents', '100'])
    fake.script('ok', finish)
    const priced = await osctl(['runs', 'start', 'local-report', '--wait'], env, undefined, {
      terminal: true,
    })
    expect(priced.exitCode, priced.output).toBe(0)
    expect(priced.stdout).toMatch(/^cost\s+\$0\.0020$/m)
    expect((await ok(['spend'])).stdout).toMatch(/^enterprise\s+-\s+\$0\.0020 \+ unpriced\s+2$/m)

    // A listed model keeps its price; bad figures are usage errors, sent nowhere.
    const listed = await osctl(
      ['llm', 'prices', 'set', '--model', 'gpt-5.4', '--input', '0', '--output', '0'],
      env,
    )
    expect(listed.exitCode).toBe(1)
    expect(listed.stderr).toMatch(/^error: invalid_request: gpt-5\.4 is in osd's price list/m)
    for (const figure of ['-1', 'free', ''])
      expect(
        (
          await osctl(
            ['llm', 'prices', 'set', '--model', 'x', '--input', figure, '--output', '1'],
            env,
          )
        ).exitCode,
      ).toBe(2)
    expect(
      (await ok(['llm', 'prices', 'remove', '--model', 'llama3.2', '--yes'])).stdout,
    ).toContain('price of llama3.2 removed')
  }, 60_000)
})
