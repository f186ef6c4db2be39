import { describe, expect, it } from 'vitest'
import { allScopes, briefScopes, parseScopes, resourceOf } from '../../shared/scopes.js'
import { cleanSlug, slugFromName } from '../../shared/slug.js'

describe('cleanSlug (spec: Task definition, slug)', () => {
  it.each([
    ['Hello World', 'hello-world'],
    ['  Déjà Vu!! Ünïcödé  ', 'deja-vu-unicode'],
    ['a__b--c..d', 'a-b-c-d'],
    ['UPPER case 42', 'upper-case-42'],
    ['---', ''],
    ['crème brûlée', 'creme-brulee'],
  ])('cleans %j to %j', (input, expected) => {
    expect(cleanSlug(input)).toBe(expected)
  })

  it('cuts a slug made from a long name to 80 characters without a trailing hyphen', () => {
    const slug = slugFromName('word '.repeat(40))
    expect(slug.length).toBeLessThanOrEqual(80)
    expect(slug.endsWith('-')).toBe(false)
  })
})

describe('scopes (spec: Authentication 3)', () => {
  it("has read and write for each of the spec's 19 resources, and for the event feed", () => {
    expect(allScopes).toHaveLength(40)
    expect(allScopes).toContain('events:read')
  })

  it('parses lists, wildcards and reports unknown scopes', () => {
    expect(parseScopes('tasks:read, runs:write').scopes).toEqual(['tasks:read', 'runs:write'])
    expect(parseScopes('tasks:*').scopes).toEqual(['tasks:read', 'tasks:write'])
    expect(parseScopes('*').scopes).toEqual(allScopes)
    expect(parseScopes('tasks:read,bogus:write,tasks:admin').unknown).toEqual([
      'bogus:write',
      'tasks:admin',
    ])
  })

  it('takes the resource from the first segment after /v1', () => {
    expect(resourceOf('/v1/tasks/abc/runs')).toBe('tasks')
    // Outbound event subscriptions are webhooks' (issue 47).
    expect(resourceOf('/v1/event-subscriptions/abc/deliveries')).toBe('webhooks')
    expect(resourceOf('/v1/events')).toBe('events')
    expect(resourceOf('/v1/enterprise')).toBe('enterprise')
    expect(resourceOf('/elsewhere')).toBeUndefined()
  })

  it('says scopes briefly, as parseScopes reads them back', () => {
    expect(briefScopes(allScopes)).toEqual(['*'])
    expect(briefScopes(['runs:write', 'tasks:read', 'runs:read'])).toEqual(['tasks:read', 'runs:*'])
    expect(briefScopes([])).toEqual([])
    for (const held of [['tasks:read'], ['runs:read', 'runs:write', 'events:read'], allScopes]) {
      expect(parseScopes(briefScopes(held).join(',')).scopes).toEqual(
        parseScopes(held.join(',')).scopes,
      )
    }
  })
})
