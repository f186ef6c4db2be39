import { describe, expect, it } from 'vitest'
import { Contract, type Exchange, type OpenApiDocument } from '../../helpers/contract.js'

// The check every route test's call() makes (helpers/contract.ts), on a small document of its own: it
// must refuse what a validating proxy refuses, or the route tests that pass say nothing.

const uuid = '0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10'
const json = { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } }
const errorOf = (codes: string[]) => ({
  'application/json': {
    schema: {
      allOf: [
        { $ref: '#/components/schemas/Error' },
        { type: 'object', properties: { error: { type: 'string', enum: codes } } },
      ],
    },
  },
})

const document: OpenApiDocument = {
  paths: {
    '/v1/things/{id}': {
      get: {
        operationId: 'getThing',
        responses: {
          200: { description: 'a thing', content: json },
          404: { description: 'error', content: errorOf(['thing_not_found']) },
          503: {
            description: 'away',
            headers: { 'Retry-After': { required: true, schema: { type: 'integer' } } },
            content: errorOf(['database_unavailable']),
          },
        },
      },
      delete: { operationId: 'deleteThing', responses: { 204: { description: 'gone' } } },
    },
    '/v1/things/{id}/events': {
      get: {
        operationId: 'followThing',
        responses: {
          200: {
            description: 'a stream of server-sent events',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        },
      },
    },
    '/v1/things/{id}/picture': {
      get: {
        operationId: 'getThingPicture',
        responses: {
          200: {
            description: 'the image',
            content: { 'image/*': { schema: { type: 'string', format: 'binary' } } },
          },
        },
      },
    },
  },
  components: {
    schemas: {
      Thing: {
        type: 'object',
        properties: {
          id: { type: 'string', format: 'uuid' },
          tags: { type: 'array', items: { $ref: '#/components/schemas/Tag' } },
          extra: { type: 'object', additionalProperties: {} },
        },
        required: ['id', 'tags'],
      },
      Tag: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      Error: {
        type: 'object',
        properties: { error: { type: 'string' }, message: { type: 'string' } },
        required: ['error'],
        additionalProperties: {},
      },
      FrameworkError: {
        type: 'object',
        properties: {
          message: { type: 'string' },
          error: { type: 'string' },
          statusCode: { type: 'integer' },
        },
        required: ['message', 'error', 'statusCode'],
      },
    },
  },
}

const contract = new Contract(document)

function answer(
  method: string,
  url: string,
  status: number,
  body?: unknown,
  headers: Record<string, string> = {},
): Exchange {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body)
  const type = body !== undefined && typeof body !== 'string' ? 'application/json' : undefined
  return {
    method,
    url,
    status,
    text,
    headers: new Headers({ ...(type ? { 'content-type': type } : {}), ...headers }),
  }
}

const thing = { id: uuid, tags: [{ name: 'a' }], extra: { anything: 1 } }

describe('the contract check', () => {
  it('passes an answer as declared', () => {
    expect(contract.problems(answer('GET', `/v1/things/${uuid}?x=1`, 200, thing))).toEqual([])
    expect(contract.problems(answer('DELETE', `/v1/things/${uuid}`, 204))).toEqual([])
    // The error shape is open for its extra fields; the code is one the operation lists.
    const missing = { error: 'thing_not_found', message: 'No thing.', issues: [] }
    expect(contract.problems(answer('GET', `/v1/things/${uuid}`, 404, missing))).toEqual([])
  })

  it('refuses a status the operation does not declare', () => {
    const [problem] = contract.problems(answer('GET', `/v1/things/${uuid}`, 201, thing))
    expect(problem).toMatch(
      /GET \/v1\/things\/\{id\} \(getThing\) answered 201, which its document does not declare \(it declares 200, 404, 503\)/,
    )
  })

  it('refuses a field no schema names, at any depth, but not where a schema says it is open', () => {
    const extraTop = { ...thing, surprise: true }
    expect(contract.problems(answer('GET', `/v1/things/${uuid}`, 200, extraTop))[0]).toMatch(
      /must NOT have additional properties \(surprise\)/,
    )
    const extraDeep = { ...thing, tags: [{ name: 'a', colour: 'red' }] }
    expect(contract.problems(answer('GET', `/v1/things/${uuid}`, 200, extraDeep))[0]).toMatch(
      /\/tags\/0 must NOT have additional properties \(colour\)/,
    )
  })

  it('refuses a wrong type, a missing field, a bad format and a code the operation does not list', () => {
    const wrong = [{ ...thing, tags: 'a' }, { id: uuid }, { ...thing, id: 'not-a-uuid' }]
    for (const body of wrong)
      expect(contract.problems(answer('GET', `/v1/things/${uuid}`, 200, body))).toHaveLength(1)
    const overlap = { error: 'overlap' }
    expect(contract.problems(answer('GET', `/v1/things/${uuid}`, 404, overlap))[0]).toMatch(
      /\/error must be equal to one of the allowed values \(\["thing_not_found"\]\)/,
    )
  })

  it('refuses an answer without the header it declares', () => {
    const away = { error: 'database_unavailable' }
    expect(contract.problems(answer('GET', `/v1/things/${uuid}`, 503, away))).toEqual([
      'GET /v1/things/{id} (getThing) answered 503 without its header Retry-After',
    ])
    const told = answer('GET', `/v1/things/${uuid}`, 503, away, { 'retry-after': '2' })
    expect(contract.problems(told)).toEqual([])
  })

  it('takes a non-JSON answer of its declared media type without reading it as JSON', () => {
    const stream = answer('GET', `/v1/things/${uuid}/events`, 200, 'event: delta\ndata: x\n\n', {
      'content-type': 'text/event-stream; charset=utf-8',
    })
    expect(contract.problems(stream)).toEqual([])
    const png = answer('GET', `/v1/things/${uuid}/picture`, 200, '\x89PNG', {
      'content-type': 'image/png',
    })
    expect(contract.problems(png)).toEqual([])
    const asJson = answer('GET', `/v1/things/${uuid}/events`, 200, { data: 1 })
    expect(contract.problems(asJson)[0]).toMatch(
      /answered 200 as application\/json; it declares text\/event-stream/,
    )
    // An answer that declares no body has none.
    expect(contract.problems(answer('DELETE', `/v1/things/${uuid}`, 204, thing))[0]).toMatch(
      /with a body; it declares none/,
    )
  })

  it('wants 405 with Allow for a method the path does not have, and 204 with Allow to OPTIONS', () => {
    const refused = { message: 'Method Not Allowed', error: 'Method Not Allowed', statusCode: 405 }
    const allow = { allow: 'DELETE, GET, HEAD, OPTIONS' }
    expect(contract.problems(answer('PATCH', `/v1/things/${uuid}`, 405, refused, allow))).toEqual(
      [],
    )
    expect(contract.problems(answer('PATCH', `/v1/things/${uuid}`, 403, { error: 'x' }))).toEqual([
      'PATCH /v1/things/{id}: Allow is null, not "DELETE, GET, HEAD, OPTIONS"',
      'PATCH /v1/things/{id} answered 403, which its document does not declare (it declares 405): {"error":"x"}',
    ])
    expect(
      contract.problems(answer('OPTIONS', `/v1/things/${uuid}`, 204, undefined, allow)),
    ).toEqual([])
    expect(contract.problems(answer('OPTIONS', `/v1/things/${uuid}`, 401, refused, allow))).toEqual(
      ['OPTIONS /v1/things/{id} answered 401, not 204 with an empty body'],
    )
  })

  it('takes only the refusals before any route on a path the document does not name', () => {
    const notFound = { message: 'Not Found', error: 'Not Found', statusCode: 404 }
    expect(contract.problems(answer('GET', '/v1/nothing', 404, notFound))).toEqual([])
    expect(contract.problems(answer('GET', '/v1/nothing', 200, thing))[0]).toMatch(
      /GET \/v1\/nothing \(no such path\) answered 200/,
    )
  })
})
