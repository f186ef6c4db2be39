import { createCipheriv, randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createSealer,
  keyIdOf,
  keyringOf,
  loadKeyring,
  sealedColumns,
  sealedKeyId,
  type Sealer,
} from '../../server/crypto.js'
import type { Running } from '../../server/serve.js'
import { freePort } from '../../server/db/embedded.js'
import { strictEgress, type EgressRule } from '../../server/egress.js'
import { resolveKey } from '../../server/domain/models/index.js'
import { connectionsForRun, createToolConnection } from '../../server/domain/tools/index.js'
import { createTestEnterprise, type TestEnterprise } from '../helpers/app.js'
import { createTestDatabase, type TestDatabase } from '../helpers/db.js'
import { serveInProcess } from '../helpers/osctl.js'
import { osd } from '../helpers/osd.js'
import { eventually } from '../helpers/wait.js'

// tools.example resolves to nothing here, which the egress check lets through (it checks again on connect).
const unresolved: EgressRule = { ...strictEgress, resolve: async () => [] }

// osd admin secrets (issue 45) as an operator runs it (in process: test/helpers/osd.ts), on a test
// database beside a running osd: rotate-key adds a key to the key file, the running osd seals with it from then on, every
// stored secret is sealed again under it (those of the form before key ids too), all still open, and
// the old key can then be removed. And the same with keys an operator keeps in OSD_SECRET_KEY.

let db: TestDatabase
let acme: TestEnterprise
let daemon: Running
let keyFile: string
const oldKey = randomBytes(32)
const b64 = (key: Buffer) => key.toString('base64')

/** How osd sealed values before key ids: nonce, tag, ciphertext; no additional data. */
function sealedTheOldWay(key: Buffer, plain: string): Buffer {
  const nonce = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, nonce)
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return Buffer.concat([nonce, cipher.getAuthTag(), body])
}

const state = `state-${randomUUID()}`
const deliveryId = randomUUID()

beforeAll(async () => {
  db = await createTestDatabase()
  acme = await createTestEnterprise(db.sql, 'Keys Corp', { mailDomain: 'osd.local' })
  keyFile = join(await mkdtemp(join(tmpdir(), 'osd-keyfile-')), 'secret-keys')
  await writeFile(keyFile, `${b64(oldKey)}\n`, { mode: 0o600 })
  daemon = await serveInProcess(db, { OSD_SECRET_KEY_FILE: keyFile, OSD_SECRET_KEY: '' })

  // Sealed by the running osd: a model key.
  const bound = await fetch(`${daemon.url}/llm/bindings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acme.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ apiKey: 'model-key-1' }),
  })
  expect(bound.status).toBe(201)
  // A tool token sealed under the old key, and values of the form before key ids in the other tables.
  await createToolConnection(
    db.sql,
    createSealer(oldKey),
    unresolved,
    acme.id,
    { name: 'ci', url: 'https://tools.example/mcp', token: 'tool-token-1', layer: 'enterprise' },
    { mayBindEnterprise: true },
  )
  await db.sql`
    insert into llm_oauth_states (state, enterprise_id, verifier_ciphertext, layer)
    values (${state}, ${acme.id}, ${sealedTheOldWay(oldKey, 'verifier-1')}, 'enterprise')`
  await db.sql`
    insert into webhook_deliveries (id, enterprise_id, kind, target, authenticated, request, sealed_body)
    values (${deliveryId}, ${acme.id}, 'task', 'deploy', true, '{}'::jsonb,
            ${sealedTheOldWay(oldKey, '{"ref":"main"}')})`
})

afterAll(async () => {
  await daemon?.stop()
})

const admin = (args: string[], env: Record<string, string> = { OSD_SECRET_KEY_FILE: keyFile }) =>
  osd(['admin', 'secrets', ...args], { DATABASE_URL: db.url, OSD_SECRET_KEY: '', ...env })

/** Every stored secret, opened with `sealer` as a run, a chat reply, a sign-in or a replay would. */
async function openEverything(sealer: Sealer) {
  const run = { enterpriseId: acme.id, taskId: randomUUID(), teamId: null, memberId: null }
  const [tool] = await connectionsForRun(db.sql, sealer, run, undefined)
  const model = await resolveKey(db.sql, sealer, acme.id, {}, 'provider_a')
  const [oauth] =
    await db.sql`select verifier_ciphertext from llm_oauth_states where state = ${state}`
  const [delivery] =
    await db.sql`select sealed_body from webhook_deliveries where id = ${deliveryId}`
  return {
    tool: tool?.token,
    model: model?.key,
    verifier: sealer.open(oauth!.verifierCiphertext, sealedColumns.llmVerifier, state),
    body: sealer.open(delivery!.sealedBody, sealedColumns.webhookBody, deliveryId),
  }
}

const everything = {
  tool: 'tool-token-1',
  model: 'model-key-1',
  verifier: 'verifier-1',
  body: '{"ref":"main"}',
}

describe('osd admin secrets', () => {
  it('rotate-key seals everything again under a new key, online; the old key can then be removed', async () => {
    const before = await admin(['status', '--json'])
    expect(before.exitCode, before.stderr).toBe(0)
    expect(JSON.parse(before.stdout)).toEqual({
      source: keyFile,
      keys: [{ id: keyIdOf(oldKey), current: true, sealed: 2 }],
      legacy: 2,
    })
    expect(await openEverything(createSealer(oldKey))).toEqual(everything)

    const rotated = await admin(['rotate-key', '--batch', '1', '--json'])
    expect(rotated.exitCode, rotated.stderr).toBe(0)
    const result = JSON.parse(rotated.stdout)
    const newId: string = result.added
    expect(newId).toMatch(/^[0-9a-f]{16}$/)
    expect(newId).not.toBe(keyIdOf(oldKey))
    expect(result).toMatchObject({
      resealed: 4,
      unopenable: [],
      legacy: 0,
      keys: [
        { id: newId, current: true, sealed: 4 },
        { id: keyIdOf(oldKey), current: false, sealed: 0 },
      ],
    })
    // The key file holds both, the new one first, readable by its owner only.
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600)
    const ring = loadKeyring('/nonexistent', { OSD_SECRET_KEY_FILE: keyFile })
    expect(ring.all.map((k) => k.id)).toEqual([newId, keyIdOf(oldKey)])
    for (const column of ['secret_ciphertext']) {
      const [row] = await db.sql`select ${db.sql(column)} as sealed from llm_connections`
      expect(sealedKeyId(row!.sealed)).toBe(newId)
    }
    // Everything opens with the file's keys, and with the new key alone.
    expect(await openEverything(createSealer(ring))).toEqual(everything)
    const newKey = ring.current.key
    expect(await openEverything(createSealer(keyringOf(newKey)))).toEqual(everything)

    // The running osd heard of the new key: what it seals now, it seals under it.
    await eventually(
      async () => {
        const res = await fetch(`${daemon.url}/llm/bindings`, {
          method: 'POST',
          headers: { authorization: `Bearer ${acme.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ apiKey: 'model-key-1' }),
        })
        expect(res.status).toBe(201)
        const [row] = await db.sql`select secret_ciphertext from llm_connections`
        return sealedKeyId(row!.secretCiphertext) === newId
      },
      10_000,
      'the running osd to seal under the new key',
    )

    const current = await admin(['remove-key', newId])
    expect(current.exitCode).toBe(2)
    expect(current.stderr).toContain('current key')
    const removed = await admin(['remove-key', keyIdOf(oldKey), '--json'])
    expect(removed.exitCode, removed.stderr).toBe(0)
    expect(JSON.parse(removed.stdout)).toMatchObject({ removed: keyIdOf(oldKey) })
    const left = await readFile(keyFile, 'utf8')
    expect(left).not.toContain(b64(oldKey))
    expect(loadKeyring('/nonexistent', { OSD_SECRET_KEY_FILE: keyFile }).all).toHaveLength(1)
    expect(
      await openEverything(createSealer(loadKeyring('/x', { OSD_SECRET_KEY_FILE: keyFile }))),
    ).toEqual(everything)
  })

  it('with keys the operator keeps in OSD_SECRET_KEY: they put the new key first, rotate-key --keep-key seals under it', async () => {
    const fileKeys = loadKeyring('/x', { OSD_SECRET_KEY_FILE: keyFile })
    const kept = fileKeys.current.key
    const theirs = randomBytes(32)
    const env = { OSD_SECRET_KEY: `${b64(theirs)},${b64(kept)}`, OSD_SECRET_KEY_FILE: '' }

    const refused = await admin(['rotate-key'], env)
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toContain('OSD_SECRET_KEY')
    expect(refused.stderr).toContain('--keep-key')

    const rotated = await admin(['rotate-key', '--keep-key', '--json'], env)
    expect(rotated.exitCode, rotated.stderr).toBe(0)
    expect(JSON.parse(rotated.stdout)).toMatchObject({
      added: null,
      resealed: 4,
      source: 'OSD_SECRET_KEY',
      keys: [
        { id: keyIdOf(theirs), current: true, sealed: 4 },
        { id: keyIdOf(kept), current: false, sealed: 0 },
      ],
    })
    expect(await openEverything(createSealer(keyringOf(theirs)))).toEqual(everything)
    const removable = await admin(['remove-key', keyIdOf(kept)], env)
    expect(removable.exitCode, removable.stderr).toBe(0)
    expect(removable.stdout).toContain('remove it from OSD_SECRET_KEY yourself')
  })
})

// The start-up check of a restored database (issue 46): every sealed column counts, and a refused
// first start leaves the data dir without a key file of its own.
describe('osd serve with a key that does not open the stored secrets', () => {
  it('refuses to start when the only stored secret is a subscription’s, and writes no key file', async () => {
    const restored = await createTestDatabase()
    const corp = await createTestEnterprise(restored.sql, 'Restored Corp', {
      mailDomain: 'osd.local',
    })
    const theirs = randomBytes(32)
    const id = randomUUID()
    await restored.sql`
      insert into event_subscriptions (id, enterprise_id, url, types, families, secret_sealed,
                                       secret_hint, created_by)
      values (${id}, ${corp.id}, 'https://hooks.example/osd', '{run.*}', '{run}',
              ${createSealer(theirs).seal('whsec-1', sealedColumns.subscriptionSecret, id)},
              'whsec_…', 'user:x')`

    // A data dir as restore leaves it, without a key: the key made for this start does not open it.
    const dataDir = await mkdtemp(join(tmpdir(), 'osd-restored-'))
    const env = { OSD_DATA_DIR: dataDir, OSD_SECRET_KEY: '', OSD_SECRET_KEY_FILE: '' }
    await expect(serveInProcess(restored, env)).rejects.toThrow(
      `the server key does not open the secrets stored in this database (event subscription secret ${id})`,
    )
    await expect(stat(join(dataDir, 'secret.key'))).rejects.toThrow(/ENOENT/)
    // Another key given: refused too.
    await expect(
      serveInProcess(restored, { ...env, OSD_SECRET_KEY: b64(randomBytes(32)) }),
    ).rejects.toThrow('does not open the secrets')

    // That instance's key put in the data dir, as the message says: it starts.
    await writeFile(join(dataDir, 'secret.key'), `${b64(theirs)}\n`, { mode: 0o600 })
    const started = await serveInProcess(restored, env)
    await started.stop()
  })

  it('a key osd cannot read stops it before the database opens', async () => {
    // A database nobody listens for: were it opened first, that would be the error.
    const nowhere = { url: `postgres://osd@127.0.0.1:${await freePort()}/osd` }
    await expect(serveInProcess(nowhere, { OSD_SECRET_KEY: 'not a key' })).rejects.toThrow(
      /^OSD_SECRET_KEY: a key is 32 bytes/,
    )
    await expect(
      serveInProcess(nowhere, { OSD_SECRET_KEY: '', OSD_SECRET_KEY_FILE: '/nowhere/osd.key' }),
    ).rejects.toThrow('OSD_SECRET_KEY_FILE names /nowhere/osd.key, which cannot be read (ENOENT)')
  })

  it('a new data dir on a database without secrets: the first start writes its key', async () => {
    const fresh = await createTestDatabase()
    const dataDir = await mkdtemp(join(tmpdir(), 'osd-new-'))
    const env = { OSD_DATA_DIR: dataDir, OSD_SECRET_KEY: '', OSD_SECRET_KEY_FILE: '' }
    const first = await serveInProcess(fresh, env)
    await first.stop()
    const key = await readFile(join(dataDir, 'secret.key'), 'utf8')
    expect(loadKeyring(dataDir, {}).current.id).toBe(keyIdOf(Buffer.from(key.trim(), 'base64')))
  })
})
