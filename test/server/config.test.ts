import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../server/config.js'

describe('OSD_PROMPT_CACHE (issue 29)', () => {
  it('is on unless set to off', () => {
    const promptCache = (value?: string) =>
      loadConfig({}, value === undefined ? {} : { OSD_PROMPT_CACHE: value }).promptCache
    expect(promptCache()).toBe(true)
    expect(promptCache('')).toBe(true)
    expect(promptCache('on')).toBe(true)
    expect(promptCache('off')).toBe(false)
    expect(promptCache(' OFF ')).toBe(false)
  })
})
