import { describe, expect, it } from 'vitest'
import type { Run, RunDetail, RunEvent, RunStatus } from '../../shared/schemas/runs.js'
import type { Query } from '../../cli/client.js'
import { ApiRequestError, UnreachableError } from '../../cli/errors.js'
import { followRun, longPollSeconds, waitExitCode } from '../../cli/follow.js'

const event = (type: string, payload: Record<string, unknown> = {}, id = 'e1'): RunEvent => ({
  id,
  type,
  payload,
  createdAt: '2026-11-22T09:30:00.000Z',
})

describe('waitExitCode', () => {
  const of = (status: RunStatus, ended = true) => waitExitCode({ ended, run: { status } })

  it('is 0 only for a run that succeeded', () => {
    expect(of('succeeded')).toBe(0)
  })

  it('is 1 for a run that ended otherwise', () => {
    expect(of('failed')).toBe(1)
    expect(of('cancelled')).toBe(1)
    expect(of('skipped_overlap')).toBe(1)
  })

  it('is 8 when the timeout ran out first', () => {
    expect(of('running', false)).toBe(8)
    expect(of('waiting_on_gate', false)).toBe(8)
  })
})

/** A client whose GET /runs/{id} answers the given details in turn, recording each query. */
function scripted(answers: { status: RunStatus; events: RunEvent[] }[]) {
  const queries: Query[] = []
  const client = {
    async get<T>(path: string, query?: Query): Promise<T> {
      expect(path).toBe('/runs/r1')
      queries.push(query ?? {})
      const next = answers.shift()
      if (!next) throw new Error('read past the script')
      const detail = { run: { id: 'r1', status: next.status } as Run, events: next.events }
      return detail as unknown as T & RunDetail
    },
  }
  return { client, queries }
}

describe('followRun', () => {
  it('long-polls after the last event seen, passes each event on once, and stops at the end', async () => {
    const { client, queries } = scripted([
      { status: 'queued', events: [event('run.queued', {}, 'e1')] },
      {
        status: 'running',
        events: [event('run.queued', {}, 'e1'), event('run.running', {}, 'e2')],
      },
      { status: 'succeeded', events: [event('run.succeeded', {}, 'e3')] },
    ])
    const seen: string[] = []
    const result = await followRun(client, 'r1', { onEvent: (e) => seen.push(e.id) })
    expect(result).toMatchObject({ ended: true, run: { status: 'succeeded' } })
    expect(seen).toEqual(['e1', 'e2', 'e3'])
    expect(queries).toEqual([
      { afterEventId: undefined, waitSeconds: undefined },
      { afterEventId: 'e1', waitSeconds: longPollSeconds },
      { afterEventId: 'e2', waitSeconds: longPollSeconds },
    ])
  })

  it('reads again without holding once an end event arrives before the status shows it', async () => {
    const { client, queries } = scripted([
      { status: 'running', events: [event('run.failed', { reason: 'x' }, 'e9')] },
      { status: 'failed', events: [] },
    ])
    const result = await followRun(client, 'r1')
    expect(result.run.status).toBe('failed')
    expect(queries[1]).toEqual({ afterEventId: 'e9', waitSeconds: undefined })
  })

  it('gives up when the timeout runs out, holding no longer than what is left', async () => {
    let clock = 0
    const { client, queries } = scripted([
      { status: 'queued', events: [event('run.queued', {}, 'e1')] },
      { status: 'queued', events: [] },
    ])
    const result = await followRun(client, 'r1', {
      timeoutSeconds: 3,
      now: () => clock,
      onRun: () => (clock += 2000),
    })
    expect(result).toMatchObject({ ended: false, run: { status: 'queued' } })
    expect(queries[1]).toEqual({ afterEventId: 'e1', waitSeconds: 1 })
  })
})

describe('followRun past the share of long-polls', () => {
  it('waits a second before reading again when a held read answers at once with nothing new', async () => {
    // osd answers at once, as waitSeconds=0, past a token's share of held long-polls.
    let clock = 0
    const slept: number[] = []
    const reads: [number, { status: RunStatus; events: RunEvent[] }][] = [
      [0, { status: 'queued', events: [event('run.queued', {}, 'e1')] }],
      [20, { status: 'queued', events: [] }], // not held
      [25_000, { status: 'queued', events: [] }], // held its whole time
      [20, { status: 'running', events: [event('run.running', {}, 'e2')] }], // held, woken
      [20, { status: 'succeeded', events: [event('run.succeeded', {}, 'e3')] }],
    ]
    const queries: Query[] = []
    const client = {
      async get<T>(_path: string, query?: Query): Promise<T> {
        queries.push(query ?? {})
        const [ms, { status, events }] = reads.shift()!
        clock += ms
        return { run: { id: 'r1', status } as Run, events } as unknown as T
      },
    }
    const result = await followRun(client, 'r1', {
      now: () => clock,
      sleep: async (ms) => {
        slept.push(ms)
        clock += ms
      },
    })
    expect(result).toMatchObject({ ended: true, run: { status: 'succeeded' } })
    expect(slept).toEqual([1000])
    expect(queries.map((q) => q.waitSeconds)).toEqual([
      undefined,
      longPollSeconds,
      longPollSeconds,
      longPollSeconds,
      longPollSeconds,
    ])
  })
})

describe('followRun while osd restarts', () => {
  /** A client whose reads answer, or throw, in turn; a clock that sleeping moves on. */
  function flaky(replies: (() => { status: RunStatus; events: RunEvent[] })[]) {
    let clock = 0
    const queries: Query[] = []
    const slept: number[] = []
    const client = {
      async get<T>(_path: string, query?: Query): Promise<T> {
        queries.push(query ?? {})
        const next = replies.shift()
        if (!next)
          throw new UnreachableError('cannot reach osd at http://osd.test/v1: ECONNREFUSED')
        const { status, events } = next()
        return { run: { id: 'r1', status } as Run, events } as unknown as T
      },
    }
    const options = {
      now: () => clock,
      sleep: async (ms: number) => {
        slept.push(ms)
        clock += ms
      },
    }
    return { client, queries, slept, options }
  }
  const unreachable = () => {
    throw new UnreachableError('cannot reach osd at http://osd.test/v1: ECONNREFUSED')
  }
  const unavailable = () => {
    throw new ApiRequestError(503, 'unavailable', 'shutting down', {})
  }

  it('reads again after osd could not be reached or answered 503, from the last event seen', async () => {
    const { client, queries, slept, options } = flaky([
      () => ({ status: 'queued', events: [event('run.queued', {}, 'e1')] }),
      unreachable,
      unavailable,
      unreachable,
      () => ({ status: 'succeeded', events: [event('run.succeeded', {}, 'e2')] }),
    ])
    const retried: string[] = []
    const result = await followRun(client, 'r1', {
      ...options,
      onRetry: (err, ms) => retried.push(`${err.message} ${ms}`),
    })
    expect(result).toMatchObject({ ended: true, run: { status: 'succeeded' } })
    expect(slept).toEqual([500, 1000, 2000])
    expect(retried[1]).toBe('shutting down 1000')
    expect(queries.slice(1).map((q) => q.afterEventId)).toEqual(['e1', 'e1', 'e1', 'e1'])
  })

  it('gives up when osd stays out of reach for maxOutageSeconds, or past the timeout', async () => {
    const away = flaky([() => ({ status: 'running', events: [event('run.running')] })])
    await expect(
      followRun(away.client, 'r1', { ...away.options, maxOutageSeconds: 30 }),
    ).rejects.toThrow(UnreachableError)
    expect(away.slept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(30_000)
    expect(away.slept.at(-1)).toBe(5000) // the pause grows to 5 s and no further

    const timed = flaky([() => ({ status: 'running', events: [event('run.running')] })])
    await expect(
      followRun(timed.client, 'r1', { ...timed.options, timeoutSeconds: 3 }),
    ).rejects.toThrow(UnreachableError)
    expect(timed.slept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(3000)
  })

  it('does not ask again when osd answered with a refusal (404, 401)', async () => {
    for (const err of [
      new ApiRequestError(404, 'run_not_found', 'No run', {}),
      new ApiRequestError(401, 'Unauthorized', 'refused', {}),
    ]) {
      const client = {
        get: async () => {
          throw err
        },
      }
      await expect(followRun(client, 'r1', { sleep: async () => undefined })).rejects.toBe(err)
    }
  })
})
