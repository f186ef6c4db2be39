import { describe, expect, it } from 'vitest'
import { storable, storableJson, unstorable, shorten } from '../../shared/text.js'

// Text PostgreSQL cannot keep (U+0000, half a surrogate pair), and its storable form (U+FFFD instead).

describe('storableJson', () => {
  it('replaces U+0000 and halves of pairs in strings and keys, at any depth, and keeps pairs', () => {
    const value = {
      text: 'a\u0000b \ud800 \u{1F600}',
      'k\u0000': ['\udc00x', 1, null, true, { deep: '\udbff' }],
      plain: String.raw`a\u0000b \\\ud800`, // backslashes and letters: plain text
    }
    expect(storableJson(value)).toEqual({
      text: 'a\ufffdb \ufffd \u{1F600}',
      'k\ufffd': ['\ufffdx', 1, null, true, { deep: '\ufffd' }],
      plain: String.raw`a\u0000b \\\ud800`,
    })
  })

  it('answers the same value when nothing needs replacing, and replaces 3,000 levels deep', () => {
    const value = { a: ['x', { b: 'y \u{1F600} \\u0000' }] }
    expect(storableJson(value)).toBe(value)
    let deep: unknown = 'a\u0000'
    for (let i = 0; i < 3000; i++) deep = [deep]
    let found = storableJson(deep)
    for (let i = 0; i < 3000; i++) found = (found as unknown[])[0]
    expect(found).toBe('a\ufffd')
  })

  it('is what storable makes of each string', () => {
    for (const text of ['\u0000', '\ud800\ud800\udc00', '\udc00\ud800', 'plain'])
      expect(storableJson([text])).toEqual([storable(text)])
    expect(unstorable(storable('\udc00\ud800\u0000'))).toBe(false)
  })
})

describe('shorten', () => {
  it('cuts to the width with an ellipsis, never between the halves of an emoji', () => {
    expect(shorten('abcdef', 6)).toBe('abcdef')
    expect(shorten('abcdefg', 6)).toBe('abcde…')
    // The fifth and sixth code units are one emoji: it goes whole.
    const rocket = 'abcd\u{1F680}efg'
    expect(shorten(rocket, 6)).toBe('abcd…')
    expect(unstorable(shorten(rocket, 6))).toBe(false)
    expect(shorten(rocket, 7)).toBe('abcd\u{1F680}…')
    expect(shorten('abc', 1)).toBe('…')
  })
})
