import { createCipheriv, randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../../server/config.js'
import {
  createSealer,
  keyIdOf,
  keyringOf,
  loadKeyring,
  sealedColumns,
  sealedKeyId,
  writeKeyFile,
} from '../../server/crypto.js'
import { strictEgress, type EgressRule } from '../../server/egress.js'
import { resolveKey } from '../../server/domain/models/index.js'
import { resealAll } from '../../server/domain/sealed/index.js'
import { connectionsForRun, createToolConnection } from '../../server/domain/tools/index.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

// tools.example resolves to nothing here, which the egress check lets through (it checks again on connect).
const unresolved: EgressRule = { ...strictEgress, resolve: async () => [] }

// The secret keys and what they seal (issue 45): a sealed value names its key and is bound to its row;
// the keyring holds the current key and older ones; values of the form before key ids still open.
// osd admin secrets rotate-key end to end: test/server/secret-keys.test.ts.

const at = sealedColumns.toolToken

/** How osd sealed values before key ids: nonce, tag, ciphertext; no additional data. */
function sealedTheOldWay(key: Buffer, plain: string): Buffer {
  const nonce = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, nonce)
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return Buffer.concat([nonce, cipher.getAuthTag(), body])
}

describe('the sealer', () => {
  it('names the key it sealed with, and opens only in the row it was sealed for', () => {
    const key = randomBytes(32)
    const sealer = createSealer(key)
    const row = randomUUID()
    const sealed = sealer.seal('a tool token', at, row)
    expect(sealedKeyId(sealed)).toBe(keyIdOf(key))
    expect(sealer.isCurrent(sealed)).toBe(true)
    expect(sealed.toString('utf8')).not.toContain('a tool token')
    expect(sealer.open(sealed, at, row)).toBe('a tool token')
    // Another row, another column, another table: it does not open.
    expect(() => sealer.open(sealed, at, randomUUID())).toThrow()
    expect(() => sealer.open(sealed, { ...at, column: 'other' }, row)).toThrow()
    expect(() => sealer.open(sealed, sealedColumns.llmSecret, row)).toThrow()
    // Altered anywhere (the key id included), it does not open either.
    for (const i of [5, 20, sealed.length - 1]) {
      const altered = Buffer.from(sealed)
      altered[i]! ^= 1
      expect(() => sealer.open(altered, at, row)).toThrow()
    }
  })

  it('opens what an older key of the ring sealed, and values of the form before key ids', () => {
    const older = randomBytes(32)
    const current = randomBytes(32)
    const row = randomUUID()
    const byOlder = createSealer(older).seal('sealed by the older key', at, row)
    const legacy = sealedTheOldWay(older, 'sealed before key ids')
    expect(sealedKeyId(legacy)).toBeUndefined()

    const ring = createSealer(keyringOf(current, older))
    expect(ring.open(byOlder, at, row)).toBe('sealed by the older key')
    expect(ring.isCurrent(byOlder)).toBe(false)
    // The old form is bound to no row: it opens anywhere, until rotate-key seals it again.
    expect(ring.open(legacy, at, randomUUID())).toBe('sealed before key ids')
    expect(ring.isCurrent(legacy)).toBe(false)
    const resealed = ring.seal('sealed before key ids', at, row)
    expect(sealedKeyId(resealed)).toBe(keyIdOf(current))

    const without = createSealer(current)
    expect(() => without.open(byOlder, at, row)).toThrow(/not in the keyring/)
    expect(() => without.open(legacy, at, row)).toThrow()
  })
})

describe('the keyring', () => {
  const b64 = (key: Buffer) => key.toString('base64')

  it('comes from OSD_SECRET_KEY (one key or several, the current first) in hex or base64', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osd-keys-'))
    const [a, b] = [randomBytes(32), randomBytes(32)]
    const one = loadKeyring(dir, { OSD_SECRET_KEY: a.toString('hex') })
    expect(one.current.id).toBe(keyIdOf(a))
    const two = loadKeyring(dir, { OSD_SECRET_KEY: `${b64(b)}, ${b64(a)}` })
    expect(two.all.map((k) => k.id)).toEqual([keyIdOf(b), keyIdOf(a)])
    expect(two.source).toEqual({ kind: 'env', variable: 'OSD_SECRET_KEY' })
    for (const bad of ['short', `${b64(a)},${b64(randomBytes(16))}`, ' , '])
      expect(() => loadKeyring(dir, { OSD_SECRET_KEY: bad }), bad).toThrow(ConfigError)
    // Nothing was written to the data dir.
    await expect(stat(join(dir, 'secret.key'))).rejects.toThrow()
  })

  it('comes from OSD_SECRET_KEY_FILE, which must exist, and never with OSD_SECRET_KEY too', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osd-keys-'))
    const file = join(dir, 'keys')
    const key = randomBytes(32)
    await writeFile(file, `# the keys\n${b64(key)}  # ${keyIdOf(key)}\n`, { mode: 0o600 })
    const ring = loadKeyring(join(dir, 'data'), { OSD_SECRET_KEY_FILE: file })
    expect(ring.current.id).toBe(keyIdOf(key))
    expect(ring.source).toEqual({ kind: 'file', path: file, variable: 'OSD_SECRET_KEY_FILE' })
    expect(() => loadKeyring(dir, { OSD_SECRET_KEY_FILE: join(dir, 'missing') })).toThrow(
      /cannot be read/,
    )
    await expect(stat(join(dir, 'missing'))).rejects.toThrow()
    expect(() => loadKeyring(dir, { OSD_SECRET_KEY_FILE: file, OSD_SECRET_KEY: b64(key) })).toThrow(
      /not both/,
    )
  })

  it('is made once in the data dir when kept, and read again when a key is added to its file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osd-keys-'))
    const first = loadKeyring(dir, {})
    const path = join(dir, 'secret.key')
    // Made in memory, written when its maker keeps it (osd serve, once it opens the stored secrets).
    await expect(stat(path)).rejects.toThrow()
    first.keep()
    expect((await stat(path)).mode & 0o777).toBe(0o600)
    expect(loadKeyring(dir, {}).current.id).toBe(first.current.id)
    const sealer = createSealer(first)

    // Another process (rotate-key) puts a new key first: values sealed under it open here once the
    // ring reads its file again, which it does by itself on meeting the unknown key id.
    const added = randomBytes(32)
    writeKeyFile(path, [{ id: keyIdOf(added), key: added }, ...first.all])
    expect((await stat(path)).mode & 0o777).toBe(0o600)
    expect(await readFile(path, 'utf8')).toContain(keyIdOf(added))
    const row = randomUUID()
    const sealedElsewhere = createSealer(added).seal('new', at, row)
    expect(sealer.open(sealedElsewhere, at, row)).toBe('new')
    expect(first.current.id).toBe(keyIdOf(added))
    expect(sealedKeyId(sealer.seal('x', at, row))).toBe(keyIdOf(added))
    // A file that cannot be read keeps the keys read before.
    await writeFile(path, 'not a key\n')
    expect(first.reload()).toBeInstanceOf(ConfigError)
    expect(first.all).toHaveLength(2)
  })
})

describe('sealing everything again under a new key (rotate-key)', () => {
  it('goes past a value no key opens, names it, and seals every other one', async () => {
    const t = await createTestApp()
    const connect = (name: string, token: string) =>
      createToolConnection(
        t.sql,
        t.sealer,
        unresolved,
        t.acme.id,
        { name, url: 'https://tools.example/mcp', token, layer: 'enterprise' },
        { mayBindEnterprise: true },
      )
    const made = await Promise.all(
      ['a', 'b', 'c'].map((name) => connect(`tools-${name}`, `token ${name}`)),
    )
    // One row holds another's sealed value (copied, or restored badly): no key opens it there.
    const [broken, ...good] = made.sort((x, y) => x.id.localeCompare(y.id))
    await t.sql`
      update tool_connections
         set token_ciphertext = (select token_ciphertext from tool_connections where id = ${good[0]!.id})
       where id = ${broken!.id}`
    const sealer = createSealer(keyringOf(randomBytes(32), t.sealer.keyring.current.key))
    const done = await resealAll(t.sql, sealer, { batch: 1 })
    expect(done.unopenable).toEqual([
      { table: 'tool_connections', column: 'token_ciphertext', row: broken!.id },
    ])
    expect(done.resealed).toBe(2)
    for (const connection of good) {
      const [row] = await t.sql<{ tokenCiphertext: Buffer }[]>`
        select token_ciphertext from tool_connections where id = ${connection.id}`
      expect(sealer.isCurrent(row!.tokenCiphertext)).toBe(true)
      expect(sealer.open(row!.tokenCiphertext, at, connection.id)).toBe(
        `token ${connection.name.slice(-1)}`,
      )
    }
  })
})

describe('a sealed value copied into another row', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await createTestApp()
  })

  it('does not open there: a tool token or a model key moved to another enterprise’s row', async () => {
    const right = { mayBindEnterprise: true }
    const connect = (enterpriseId: string, token: string) =>
      createToolConnection(
        t.sql,
        t.sealer,
        unresolved,
        enterpriseId,
        { name: 'ci', url: 'https://tools.example/mcp', token, layer: 'enterprise' },
        right,
      )
    const ours = await connect(t.acme.id, 'acme tool token')
    const theirs = await connect(t.other.id, 'other tool token')
    const run = (enterpriseId: string) => ({
      enterpriseId,
      taskId: randomUUID(),
      teamId: null,
      memberId: null,
    })
    const tokenOf = async (enterpriseId: string) =>
      (await connectionsForRun(t.sql, t.sealer, run(enterpriseId), undefined))[0]?.token
    expect(await tokenOf(t.other.id)).toBe('other tool token')

    await t.sql`
      update tool_connections
         set token_ciphertext = (select token_ciphertext from tool_connections where id = ${ours.id})
       where id = ${theirs.id}`
    await expect(tokenOf(t.other.id)).rejects.toThrow()
    expect(await tokenOf(t.acme.id)).toBe('acme tool token')

    for (const [token, apiKey] of [
      [t.acme.token, 'acme-model-key'],
      [t.other.token, 'other-model-key'],
    ] as const) {
      const bound = await t.call('POST', '/v1/llm/bindings', { token, body: { apiKey } })
      expect(bound.status, bound.text).toBe(201)
    }
    const keyOf = async (enterpriseId: string) =>
      (await resolveKey(t.sql, t.sealer, enterpriseId, {}, 'provider_a'))?.key
    expect(await keyOf(t.other.id)).toBe('other-model-key')
    await t.sql`
      update llm_connections
         set secret_ciphertext = (select secret_ciphertext from llm_connections
                                   where enterprise_id = ${t.acme.id} and layer = 'enterprise')
       where enterprise_id = ${t.other.id} and layer = 'enterprise'`
    await expect(keyOf(t.other.id)).rejects.toThrow()
    expect(await keyOf(t.acme.id)).toBe('acme-model-key')
  })

  it('is in a column rotate-key knows: every bytea column is a hash, a picture or a file, or sealed', async () => {
    // A table that stores a secret osd must use again seals it (DESIGN 3) in a column of sealedColumns,
    // which rotate-key and status walk: one missing there would stay under the old key, and removing
    // that key would lose it. Pictures and attachments are content, not credentials.
    const content = ['enterprise_avatars.data', 'member_avatars.data', 'email_attachments.data']
    const columns = await t.sql<{ table: string; column: string }[]>`
      select table_name as table, column_name as column
        from information_schema.columns
       where table_schema = current_schema() and data_type = 'bytea'
       order by 1, 2`
    const sealed = Object.values(sealedColumns).map((c) => `${c.table}.${c.column}`)
    const others = columns
      .map((c) => `${c.table}.${c.column}`)
      .filter((name) => !name.endsWith('_hash') && !content.includes(name))
    expect(others.sort()).toEqual([...sealed].sort())
  })

  it('keeps a model key bound to its row when a second bind replaces it (the upsert keeps the id)', async () => {
    const e = await t.createEnterprise('Rebind Corp')
    for (const apiKey of ['first-model-key', 'second-model-key']) {
      const res = await t.call('POST', '/v1/llm/bindings', { token: e.token, body: { apiKey } })
      expect(res.status, res.text).toBe(201)
    }
    const rows = await t.sql`select id from llm_connections where enterprise_id = ${e.id}`
    expect(rows).toHaveLength(1)
    expect((await resolveKey(t.sql, t.sealer, e.id, {}, 'provider_a'))?.key).toBe(
      'second-model-key',
    )
  })
})
