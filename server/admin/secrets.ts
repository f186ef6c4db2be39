import { randomBytes } from 'node:crypto'
import type { Command } from 'commander'
import type { Config } from '../config.js'
import {
  createSealer,
  keyIdOf,
  loadKeyring,
  writeKeyFile,
  type Keyring,
  type Sealer,
} from '../crypto.js'
import type { Sql } from '../db/sql.js'
import type { Unopenable } from '../domain/sealed/index.js'

// osd admin secrets (issue 45): the keys that seal what osd must use again (server/crypto.ts), rotated
// online. rotate-key puts a new key first in the key file, tells every osd process to read its keys
// again, and seals every stored value again under it, in batches; remove-key takes an old key out once
// nothing is sealed under it. With OSD_SECRET_KEY, which osd cannot change, the operator puts the new
// key first there and runs rotate-key --keep-key (docs/configuration.md, "The secret key").

/** The sealed values' face, loaded by the command that runs (osd --help reads none of it; issue 40). */
const sealed = () => import('../domain/sealed/index.js')

export interface SecretsTools {
  withDatabase<T>(fn: (sql: Sql, config: Config) => Promise<T>): Promise<T>
  print(json: boolean, value: unknown, human: () => string): void
  usage(message: string): Error
}

interface KeyView {
  id: string
  current: boolean
  /** How many stored values it seals. */
  sealed: number
}

interface KeyringView {
  source: string
  keys: KeyView[]
  /** Values sealed before key ids: they open under a key of the ring, and tie none of them down. */
  legacy: number
}

async function describe(sql: Sql, keyring: Keyring): Promise<KeyringView> {
  const use = await (await sealed()).sealedKeyUse(sql)
  const keys = keyring.all.map((k, i) => ({
    id: k.id,
    current: i === 0,
    sealed: use.byKey[k.id] ?? 0,
  }))
  // A value sealed under a key the ring lacks: nothing opens it on this host.
  for (const [id, sealed] of Object.entries(use.byKey))
    if (!keyring.find(id)) keys.push({ id, current: false, sealed })
  return { source: sourceText(keyring), keys, legacy: use.legacy }
}

function sourceText(keyring: Keyring): string {
  const source = keyring.source
  if (!source) return 'given'
  return source.kind === 'env' ? 'OSD_SECRET_KEY' : source.path
}

function human(view: KeyringView, lead: string[] = []): string {
  return [
    ...lead,
    `keys (${view.source}), the current first:`,
    ...view.keys.map(
      (k) =>
        `  ${k.id}  ${k.current ? 'current' : 'older  '}  seals ${k.sealed}` +
        (k.current || k.sealed > 0
          ? ''
          : '  (removable: osd admin secrets remove-key ' + k.id + ')'),
    ),
    ...(view.legacy > 0
      ? [
          `  ${view.legacy} value(s) sealed before key ids: rotate-key seals them under the current key`,
        ]
      : []),
  ].join('\n')
}

/** The keyring's file, which osd may write; a usage error for OSD_SECRET_KEY. */
function keyFile(keyring: Keyring, tools: SecretsTools, what: string): string {
  const source = keyring.source
  if (source?.kind !== 'file')
    throw tools.usage(`the keys come from OSD_SECRET_KEY, which osd cannot change: ${what}`)
  return source.path
}

/**
 * Seals every stored value under the current key, pass after pass until none is left under another
 * (a process that had not yet read a new key may seal one under the old key meanwhile) but those no key
 * opens, which are answered.
 */
async function resealEverything(
  sql: Sql,
  sealer: Sealer,
  batch: number,
): Promise<{ resealed: number; unopenable: Unopenable[] }> {
  let total = 0
  let unopenable: Unopenable[] = []
  const { resealAll, sealedKeyUse } = await sealed()
  for (let pass = 0; pass < 5; pass++) {
    const done = await resealAll(sql, sealer, { batch })
    total += done.resealed
    unopenable = done.unopenable
    const use = await sealedKeyUse(sql)
    const left =
      use.legacy +
      Object.entries(use.byKey)
        .filter(([id]) => id !== sealer.keyring.current.id)
        .reduce((n, [, count]) => n + count, 0)
    if (left <= unopenable.length) break
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
  return { resealed: total, unopenable }
}

export function registerSecrets(admin: Command, tools: SecretsTools): void {
  const secrets = admin
    .command('secrets')
    .description('the keys that encrypt model keys, tool tokens and webhook bodies at rest')

  secrets
    .command('status')
    .description('the keys, the current first, and how many stored values each seals')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const view = await tools.withDatabase((sql, config) =>
        describe(sql, loadKeyring(config.dataDir)),
      )
      tools.print(opts.json ?? false, view, () => human(view))
    })

  secrets
    .command('rotate-key')
    .description(
      'add a new current key to the key file and seal every stored secret again under it, online, in batches',
    )
    .option(
      '--keep-key',
      'add no key: seal everything under the current key (the first of OSD_SECRET_KEY, put there by you)',
    )
    .option('--batch <n>', 'rows sealed again per statement', '100')
    .option('--json', 'print JSON')
    .action(async (opts: { keepKey?: boolean; batch: string; json?: boolean }) => {
      const batch = Number(opts.batch)
      if (!Number.isInteger(batch) || batch < 1 || batch > 10_000)
        throw tools.usage('--batch takes a whole number from 1 to 10000')
      const result = await tools.withDatabase(async (sql, config) => {
        const keyring = loadKeyring(config.dataDir)
        // A data dir without a key file: the key made now is the one everything is sealed under, so it
        // is written (as the first osd serve would), never held in memory only.
        keyring.keep()
        let added: string | undefined
        if (!opts.keepKey) {
          const path = keyFile(
            keyring,
            tools,
            'put a new key first in it (the old ones after it, comma-separated), restart every osd ' +
              'process with it, then run `osd admin secrets rotate-key --keep-key`',
          )
          const key = randomBytes(32)
          writeKeyFile(path, [{ id: keyIdOf(key), key }, ...keyring.all])
          const failed = keyring.reload()
          if (failed) throw failed
          added = keyring.current.id
        }
        // Every osd process reads its keys again and seals with the new one from now on.
        const { secretKeysChangedChannel } = await sealed()
        await sql`select pg_notify(${secretKeysChangedChannel}, ${keyring.current.id})`
        const { resealed, unopenable } = await resealEverything(sql, createSealer(keyring), batch)
        return { added: added ?? null, resealed, unopenable, ...(await describe(sql, keyring)) }
      })
      tools.print(opts.json ?? false, result, () =>
        human(result, [
          result.added
            ? `new current key ${result.added} added to ${result.source}`
            : `current key ${result.keys[0]!.id} kept`,
          `${result.resealed} stored secret(s) sealed again under it`,
          ...(result.unopenable.length > 0
            ? [
                `${result.unopenable.length} stored secret(s) open under no key of the ring, left as they are ` +
                  '(nothing can use them: set each again, or remove its row):',
                ...result.unopenable.map((u) => `  ${u.table}.${u.column} of row ${u.row}`),
              ]
            : []),
        ]),
      )
    })

  secrets
    .command('remove-key')
    .argument('<id>', 'the key id (osd admin secrets status)')
    .description('take an older key out of the key file, once no stored secret is sealed under it')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const result = await tools.withDatabase(async (sql, config) => {
        const keyring = loadKeyring(config.dataDir)
        const view = await describe(sql, keyring)
        const key = view.keys.find((k) => k.id === id)
        if (!key || !keyring.find(id)) throw tools.usage(`no key ${id} in ${view.source}`)
        if (key.current)
          throw tools.usage(`key ${id} is the current key: rotate-key makes another current first`)
        if (key.sealed > 0 || view.legacy > 0)
          throw tools.usage(
            `key ${id} still opens stored secrets (${key.sealed} sealed under it, ${view.legacy} ` +
              'sealed before key ids): run `osd admin secrets rotate-key --keep-key` first',
          )
        if (keyring.source?.kind === 'env') return { removed: id, source: view.source, edit: true }
        writeKeyFile(
          keyFile(keyring, tools, ''),
          keyring.all.filter((k) => k.id !== id),
        )
        await sql`select pg_notify(${(await sealed()).secretKeysChangedChannel}, ${id})`
        return { removed: id, source: view.source, edit: false }
      })
      tools.print(opts.json ?? false, result, () =>
        result.edit
          ? `no stored secret needs key ${id}: remove it from OSD_SECRET_KEY yourself`
          : `key ${id} removed from ${result.source}`,
      )
    })
}
