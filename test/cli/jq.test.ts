import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { fixGlue, readGlue, runJq } from '../../cli/jq-runtime.js'

// jq-wasm's glue, loaded with its faults fixed (cli/jq-runtime.ts; issue 48).

describe('jq, as osctl loads it', () => {
  it('finds every fix in the jq-wasm installed, and refuses a glue that lacks one, naming it', () => {
    const file = createRequire(import.meta.url).resolve('jq-wasm/dist/build/jq.js')
    const { source, wasmBinary } = readGlue(file)
    expect(() => fixGlue(source)).not.toThrow()
    // The module apart from the glue (which keeps an empty copy): WebAssembly's magic number first.
    expect([...wasmBinary.subarray(0, 4)]).toEqual([0x00, 0x61, 0x73, 0x6d])
    expect(source.length).toBeLessThan(readFileSync(file).length / 5)
    expect(() =>
      fixGlue(source.replace('stdinBuffer.slice(1)', 'stdinBuffer.slice(1, 2)')),
    ).toThrow(
      'jq-wasm is not the version osctl knows: input read one byte at a time without copying the rest',
    )
  })

  it('reads a large input whole and prints every result (the glue copied it at each byte)', async () => {
    // 20,000 values, about 1.3 MB: minutes in the glue as installed (quadratic), well under a second
    // here. Not a timing test: the file's timeout is the bound, the answer what is checked.
    const items = Array.from({ length: 20_000 }, (_, i) => ({
      id: `run-${i}`,
      n: i,
      note: 'é ✓ x',
    }))
    const input = JSON.stringify({ items }, null, 2)
    const sum = await runJq(input, '[.items[].n] | add')
    expect(sum).toEqual({ status: 0, stdout: `${(19_999 * 20_000) / 2}\n`, stderr: '' })
    const ids = await runJq(input, '.items[].id')
    expect(ids.stdout.split('\n')).toHaveLength(20_001)
    expect(ids.stdout.endsWith('run-19999\n')).toBe(true)
    const notes = await runJq(input, '.items[0].note')
    expect(notes.stdout).toBe('é ✓ x\n')
  })

  it("answers jq's status and what it printed before failing, untrimmed", async () => {
    expect(await runJq('"  indented"', '.')).toEqual({
      status: 0,
      stdout: '  indented\n',
      stderr: '',
    })
    const failed = await runJq('[{"x":1},"a"]', '.[] | .x')
    expect(failed.stdout).toBe('1\n')
    expect(failed.status).toBe(5)
    expect(failed.stderr).toMatch(/^jq: error \(at .*\): Cannot index string with (string )?"x"/)
    const refused = await runJq('{}', '.a |||')
    expect(refused.status).toBe(3)
    expect(refused.stderr).toMatch(/syntax error/)
    // Several JSON values in, each in turn, as jq reads stdin; and again in the same process.
    expect((await runJq('{"a":1}\n{"a":2}\n', '.a')).stdout).toBe('1\n2\n')
  })
})
