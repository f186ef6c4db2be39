import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FeedEvent, FeedPage } from '../../shared/schemas/events.js'
import { ApiClient, type RequestOptions } from '../../cli/client.js'
import { followEvents } from '../../cli/commands/events.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { eventually } from '../helpers/wait.js'

// osctl events follow (issue 47) against a real daemon and its engine: the feed's events as they
// come, one JSON object per line off a terminal, one readable line on one; a refusal is an error.
// osctl subscriptions: outbound webhooks made, read, changed and retried against a receiver here.

let cli: CliDaemon
let taskSlug: string

beforeAll(async () => {
  cli = await startCliDaemon('Event Feed Cli')
  const task = await cli.json([
    'tasks',
    'create',
    '-d',
    JSON.stringify({
      name: 'Feed',
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    }),
  ])
  taskSlug = task.slug
})

const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((line) => FeedEvent.parse(JSON.parse(line)))

describe('osctl events follow', () => {
  it('prints one JSON object per event on a pipe, from --after, and stops after --count', async () => {
    await cli.json(['runs', 'start', taskSlug, '--wait'])
    const res = await osctl(['events', 'follow', '--after', '0', '--count', '3'], cli.env)
    expect(res.exitCode, res.stderr).toBe(0)
    const events = lines(res.stdout)
    expect(events.map((e) => e.type)).toEqual(['run.queued', 'run.running', 'run.succeeded'])
    expect(events.map((e) => e.position)).toEqual([1, 2, 3])
  })

  it('follows from now, keeping to --types, and prints a line a person reads on a terminal', async () => {
    const following = osctl(
      ['events', 'follow', '--types', 'run.succeeded', '--count', '1'],
      cli.env,
      undefined,
      { terminal: true },
    )
    // Whether the stream is open yet is not seen from here: runs start until one is after it.
    const runs: string[] = []
    await eventually(
      async () => {
        runs.push((await cli.json(['runs', 'start', taskSlug, '--wait'])).id)
        return following.printed().stdout.length > 0
      },
      30_000,
      'a run.succeeded line',
    )
    const res = await following
    expect(res.exitCode, res.stderr).toBe(0)
    expect(res.stdout).toMatch(/^\s+\d+ {2}\S+ {2}run\.succeeded\s+runId=/)
    expect(runs.some((id) => res.stdout.includes(`runId=${id}`))).toBe(true)
    expect(res.stdout.trim().split('\n')).toHaveLength(1)
  })

  it('misses nothing that came while its stream was away, when it follows from now', async () => {
    // A client whose first stream drops once open, before any event came (osd restarting, a proxy),
    // and whose second opens once a run made while it was away is in the feed.
    let dropped!: () => void
    const drop = new Promise<void>((resolve) => (dropped = resolve))
    let cameBack!: () => void
    const back = new Promise<void>((resolve) => (cameBack = resolve))
    let reopened!: () => void
    const open = new Promise<void>((resolve) => (reopened = resolve))
    class Dropping extends ApiClient {
      private streams = 0
      override async stream(path: string, options: RequestOptions & { accept?: string } = {}) {
        const n = ++this.streams
        if (n === 2) await back
        const body = await super.stream(path, options)
        if (n > 1) {
          reopened()
          return body
        }
        dropped()
        return (async function* (): AsyncGenerator<Buffer> {
          throw Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })
        })()
      }
    }
    const client = new Dropping(cli.daemon.url, cli.enterprise.token)
    const { deps, stdout } = fakeDeps(new FakeApi(() => ({})), { json: true })
    const following = followEvents(
      { ...deps, client: () => client },
      { types: 'run.queued', count: '1' },
    )
    await drop
    const meanwhile = await cli.json(['runs', 'start', taskSlug])
    await eventually(
      async () => {
        const res = await fetch(`${cli.daemon.url}/events?after=0&limit=200&types=run.queued`, {
          headers: { authorization: `Bearer ${cli.enterprise.token}` },
        })
        const page = FeedPage.parse(await res.json())
        return page.data.some((e) => e.subject.runId === meanwhile.id)
      },
      10_000,
      'the run made meanwhile in the feed',
    )
    cameBack()
    await open
    // A run after it: what a follow that read on from a later "now" printed first.
    await cli.json(['runs', 'start', taskSlug])
    await following
    expect(lines(stdout()).map((e) => e.subject.runId)).toEqual([meanwhile.id])
  })

  it('fails on a refusal: a malformed filter, a position that is not one', async () => {
    const bad = await osctl(['events', 'follow', '--types', 'RUN.*'], cli.env)
    expect(bad.exitCode).toBe(1)
    expect(bad.stderr).toContain('types')
    const usage = await osctl(['events', 'follow', '--after', '-3'], cli.env)
    expect(usage.exitCode).toBe(2)
  })
})

describe('osctl subscriptions', () => {
  const got: { headers: Record<string, string>; body: string }[] = []
  const receiver = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => (body += chunk))
    req.on('end', () => {
      got.push({ headers: req.headers as Record<string, string>, body })
      res.writeHead(200).end('ok')
    })
  })
  let url: string
  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
  })
  afterAll(() => new Promise((resolve) => receiver.close(resolve)))

  it('creates one (the secret once), lists, gets, shows deliveries, retries, rotates, deletes', async () => {
    const created = await osctl(
      [
        'subscriptions',
        'create',
        '--hook-url',
        url,
        '--types',
        'gate.waiting',
        '--description',
        'ops',
      ],
      cli.env,
    )
    expect(created.exitCode, created.stderr).toBe(0)
    expect(created.stderr).toContain('shown this once')
    const secret = /whsec_\S+/.exec(created.stdout)![0]
    const id = /^id\s+(\S+)$/m.exec(created.stdout)![1]!
    const listed = await cli.json(['subscriptions', 'list'])
    expect(listed.map((s: { id: string }) => s.id)).toContain(id)
    const shown = await osctl(['subscriptions', 'get', id], cli.env)
    expect(shown.stdout).not.toContain(secret)
    expect(shown.stdout).toContain(`…${secret.slice(-4)}`)

    await cli.db.sql`
      insert into gates (enterprise_id, kind, tool, summary)
      values (${cli.enterprise.id}, 'question', 'os.ask_ceo', 'Ship?')`
    await eventually(() => got.length === 1, 15_000, 'the delivery')
    expect(() => new Webhook(secret).verify(got[0]!.body, got[0]!.headers)).not.toThrow()
    let deliveries: { data: { id: string; status: string }[] } = { data: [] }
    await eventually(
      async () =>
        (deliveries = await cli.json(['subscriptions', 'deliveries', id])).data[0]?.status ===
        'succeeded',
      10_000,
      'a delivery that succeeded',
    )
    const deliveryId = deliveries.data[0]!.id
    const table = await osctl(['subscriptions', 'deliveries', id], cli.env)
    expect(table.stdout).toMatch(new RegExp(`${deliveryId}.*gate\\.waiting.*succeeded.*200 in`))
    const retried = await osctl(['subscriptions', 'retry', id, deliveryId], cli.env)
    expect(retried.exitCode, retried.stderr).toBe(0)
    await eventually(() => got.length === 2, 15_000, 'the retry')
    expect(got[1]!.headers['webhook-id']).toBe(got[0]!.headers['webhook-id'])

    const refused = await osctl(['subscriptions', 'rotate-secret', id], cli.env)
    expect(refused.exitCode).toBe(2)
    const rotated = await osctl(['subscriptions', 'rotate-secret', id, '--yes'], cli.env)
    expect(rotated.exitCode, rotated.stderr).toBe(0)
    expect(/whsec_\S+/.exec(rotated.stdout)![0]).not.toBe(secret)
    const disabled = await cli.json(['subscriptions', 'update', id, '--disable'])
    expect(disabled.status).toBe('disabled')
    const bad = await osctl(
      ['subscriptions', 'update', id, '--hook-url', 'http://169.254.169.254/latest'],
      cli.env,
    )
    expect(bad.exitCode).toBe(1)
    expect(bad.stderr).toContain('url_not_allowed')
    const deleted = await osctl(['subscriptions', 'delete', id, '--yes'], cli.env)
    expect(deleted.exitCode, deleted.stderr).toBe(0)
    expect((await osctl(['subscriptions', 'get', id], cli.env)).exitCode).toBe(1)
  })
})
