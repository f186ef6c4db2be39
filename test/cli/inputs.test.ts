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

  it('reads a number only when it reads back as typed, so versions and long ids stay strings', () => {
    expect(
      parseInputs(['a=7', 'b=-2.5', 'c=0', 'd=1.10', 'e=1e3', 'f=12345678901234567890']),
    ).toEqual({ a: 7, b: -2.5, c: 0, d: '1.10', e: '1e3', f: '12345678901234567890' })
    expect(jsonOrString('1e999')).toBe('1e999')
    expect(jsonOrString(' 7 ')).toBe(7)
    expect(jsonOrString('[1.10]')).toEqual([1.1]) // inside JSON, JSON's own reading
  })

  it('collects a repeated option and reads JSON leniently', () => {
    expect(collect('b=2', collect('a=1'))).toEqual(['a=1', 'b=2'])
    expect(jsonOrString('[1,2]')).toEqual([1, 2])
    expect(jsonOrString('{nope')).toBe('{nope')
  })
})
