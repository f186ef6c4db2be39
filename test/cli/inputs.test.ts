import { describe, expect, it } from 'vitest'
import { UsageError } from '../../cli/errors.js'
import { collect, jsonOrString, parseInputs } from '../../cli/inputs.js'

describe('parseInputs', () => {
  it('reads each value as JSON when it parses, else keeps the string', () => {
    expect(
      parseInputs(['a=1', 'b=true', 'c=null', 'd={"x":[1]}', 'e=hello world', 'f="7"', 'g=']),
    ).toEqual({ a: 1, b: true, c: null, d: { x: [1] }, e: 'hello world', f: '7', g: '' })
  })

  it('splits at the first =, and a later pair of the same key wins', () => {
    expect(parseInputs(['url=https://x.test/?q=1', 'n=1', 'n=2'])).toEqual({
      url: 'https://x.test/?q=1',
      n: 2,
    })
  })

  it('refuses a pair without a key or without =, as a usage error', () => {
    expect(() => parseInputs(['novalue'])).toThrow(UsageError)
    expect(() => parseInputs(['=1'])).toThrow(/key=value/)
  })

  it('keeps __proto__ an ordinary key', () => {
    const input = parseInputs(['__proto__={"polluted":true}'])
    expect(Object.getPrototypeOf(input)).toBe(Object.prototype)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('collects a repeated option and reads JSON leniently', () => {
    expect(collect('b=2', collect('a=1'))).toEqual(['a=1', 'b=2'])
    expect(jsonOrString('[1,2]')).toEqual([1, 2])
    expect(jsonOrString('{nope')).toBe('{nope')
  })
})
