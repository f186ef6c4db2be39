import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { ConfigError } from './config.js'

// Credentials the service must use again later (model keys, tool tokens, OAuth verifiers, replayable
// webhook bodies) are encrypted at rest with AES-256-GCM (DESIGN 3) under a keyring: the current key,
// which seals, and older keys, which still open what they sealed until `osd admin secrets rotate-key`
// has sealed it again under the current one (issue 45). The keys come from, in this order:
//
// - OSD_SECRET_KEY: one key, or several separated by commas, the current first (each 32 bytes, in hex
//   or base64). osd never changes it: an operator with a key manager of their own puts keys there.
// - OSD_SECRET_KEY_FILE: a file of keys, one a line, the current first (# starts a comment). It must
//   exist. It keeps the keys apart from the data directory (and its backups): docs/configuration.md.
// - <data dir>/secret.key, in the same format, made with one key at the first start.
//
// Processes sharing a database must share the keys. A sealed value names the key that sealed it and is
// bound to its row: its table, column and row id are its AES-GCM additional data, so a ciphertext
// copied into another row (another enterprise's) does not open there. Values sealed before this format
// (no key id, no binding) still open, under any key of the ring, until rotate-key seals them again.

/** Where a sealed value is stored: its table, its column, and its row's key. */
export interface SealedColumn {
  table: string
  column: string
  /** The column that names the row (its primary key), and its type. */
  key: string
  keyType: 'uuid' | 'text'
}

/** Every column osd stores sealed values in: what rotate-key seals again (domain/sealed/sealed.ts). */
export const sealedColumns = {
  llmSecret: {
    table: 'llm_connections',
    column: 'secret_ciphertext',
    key: 'id',
    keyType: 'uuid',
  },
  llmVerifier: {
    table: 'llm_oauth_states',
    column: 'verifier_ciphertext',
    key: 'state',
    keyType: 'text',
  },
  toolToken: {
    table: 'tool_connections',
    column: 'token_ciphertext',
    key: 'id',
    keyType: 'uuid',
  },
  webhookBody: {
    table: 'webhook_deliveries',
    column: 'sealed_body',
    key: 'id',
    keyType: 'uuid',
  },
  subscriptionSecret: {
    table: 'event_subscriptions',
    column: 'secret_sealed',
    key: 'id',
    keyType: 'uuid',
  },
} as const satisfies Record<string, SealedColumn>

export interface Sealer {
  /** Seals `plain` under the current key, for the row `rowKey` of `at`. */
  seal(plain: string, at: SealedColumn, rowKey: string): Buffer
  /** Opens what was sealed for that row; throws if it was sealed for another, or altered. */
  open(sealed: Buffer | Uint8Array, at: SealedColumn, rowKey: string): string
  /** Whether `sealed` names the current key (else rotate-key seals it again). */
  isCurrent(sealed: Buffer | Uint8Array): boolean
  readonly keyring: Keyring
}

export interface SecretKey {
  /** 16 hex characters derived from the key: stored with what it seals, shown to operators. */
  id: string
  key: Buffer
}

/** Where a keyring's keys come from. */
export type KeySource =
  | { kind: 'env'; variable: 'OSD_SECRET_KEY' }
  | { kind: 'file'; path: string; variable: 'OSD_SECRET_KEY_FILE' | undefined }

/** A key's id: the first 8 bytes of an HMAC of a fixed text under the key, in hex. */
export function keyIdOf(key: Buffer): string {
  return createHmac('sha256', key)
    .update('osd secret key id')
    .digest()
    .subarray(0, 8)
    .toString('hex')
}

function parseKey(text: string, where: string): Buffer {
  const key = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64')
  if (key.length !== 32)
    throw new ConfigError(`${where}: a key is 32 bytes, in hex (64 characters) or base64`)
  return key
}

/** The keys of a file or variable's text: one per line or comma, the current first. */
export function parseKeys(text: string, where: string): SecretKey[] {
  const keys = text
    .split('\n')
    .flatMap((line) => line.replace(/#.*/, '').split(','))
    .map((part) => part.trim())
    .filter(Boolean)
    .map((line) => {
      const key = parseKey(line, where)
      return { id: keyIdOf(key), key }
    })
  if (keys.length === 0) throw new ConfigError(`${where} holds no key`)
  return keys
}

/** The current key and the older ones, by id; read again (reload) when its source changes. */
export class Keyring {
  private keys: SecretKey[]
  private lastReload = 0

  constructor(
    readonly source: KeySource | undefined,
    private readonly read: () => SecretKey[],
    /** The first read, when it differs (the data dir's key is made then, never later). */
    initial: () => SecretKey[] = read,
    /** Writes a key `initial` made, where `read` finds it; answers the keys to use from then. */
    private unwritten?: () => SecretKey[],
  ) {
    this.keys = initial()
  }

  /**
   * Writes the key made at this first start (loadKeyring) to the data dir, once the caller knows it is
   * the right one: a start refused because the key does not open a restored database's secrets leaves
   * no file of its own for the operator to overwrite. Nothing to do for keys that were read.
   */
  keep(): void {
    if (!this.unwritten) return
    this.keys = this.unwritten()
    this.unwritten = undefined
  }

  get current(): SecretKey {
    return this.keys[0]!
  }

  get all(): readonly SecretKey[] {
    return this.keys
  }

  find(id: string): SecretKey | undefined {
    return this.keys.find((k) => k.id === id)
  }

  /**
   * Reads the source again (after rotate-key added or removed a key); keeps the keys it has, and
   * answers the failure, if the source cannot be read. At most once a second unless forced.
   */
  reload(force = true): Error | undefined {
    const now = Date.now()
    if (!force && now - this.lastReload < 1000) return undefined
    this.lastReload = now
    try {
      this.keys = this.read()
      return undefined
    } catch (err) {
      return err as Error
    }
  }
}

/** A keyring of the keys given (tests; a one-off). */
export function keyringOf(...keys: Buffer[]): Keyring {
  const ring = keys.map((key) => ({ id: keyIdOf(key), key }))
  return new Keyring(undefined, () => ring)
}

/**
 * The keyring of this host: OSD_SECRET_KEY, else OSD_SECRET_KEY_FILE, else <data dir>/secret.key
 * (a new key when missing, written by keep() only). Both variables at once are refused: which would
 * win is not something to guess about keys.
 */
export function loadKeyring(dataDir: string, env: NodeJS.ProcessEnv = process.env): Keyring {
  const given = env.OSD_SECRET_KEY
  const file = env.OSD_SECRET_KEY_FILE
  if (given && file) throw new ConfigError('set OSD_SECRET_KEY or OSD_SECRET_KEY_FILE, not both')
  if (given) {
    const keys = parseKeys(given, 'OSD_SECRET_KEY')
    return new Keyring({ kind: 'env', variable: 'OSD_SECRET_KEY' }, () => keys)
  }
  if (file) {
    return new Keyring({ kind: 'file', path: file, variable: 'OSD_SECRET_KEY_FILE' }, () => {
      let text: string
      try {
        text = readFileSync(file, 'utf8')
      } catch (err) {
        throw new ConfigError(
          `OSD_SECRET_KEY_FILE names ${file}, which cannot be read (${(err as NodeJS.ErrnoException).code}): ` +
            'osd makes no key there, since one made by mistake would open none of the secrets stored',
        )
      }
      return parseKeys(text, file)
    })
  }
  const path = join(dataDir, 'secret.key')
  const read = () => parseKeys(readFileSync(path, 'utf8'), path)
  let first: SecretKey[]
  let made: Buffer | undefined
  try {
    first = read()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    // Held in memory until keep(): the data dir of a restored database has no key file either, and
    // one made here would be the wrong key, on disk (osd serve checks it first: serve.ts).
    made = randomBytes(32)
    first = [{ id: keyIdOf(made), key: made }]
  }
  const key = made
  const write = key
    ? () => {
        mkdirSync(dataDir, { recursive: true, mode: 0o700 })
        try {
          writeFileSync(path, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
          return [{ id: keyIdOf(key), key }]
        } catch {
          // Another process wrote it first: use that one.
          return read()
        }
      }
    : undefined
  return new Keyring({ kind: 'file', path, variable: undefined }, read, () => first, write)
}

/**
 * Writes the keys to a key file, the current first, replacing it at once (a new file renamed over the
 * old, readable by its owner only), so a process reading it never sees half of it.
 */
export function writeKeyFile(path: string, keys: readonly SecretKey[]): void {
  const text =
    '# osd secret keys, the current first (osd admin secrets rotate-key); each opens what it sealed\n' +
    keys.map((k) => `${k.key.toString('base64')}  # ${k.id}`).join('\n') +
    '\n'
  const temporary = join(dirname(path), `.secret-keys-${randomBytes(6).toString('hex')}`)
  writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' })
  chmodSync(temporary, 0o600)
  renameSync(temporary, path)
}

/** What a sealed value starts with: "OSK" and the format's version, then the key id (8 bytes). */
export const sealedMagic = Buffer.from('OSK\x01', 'latin1')
const magic = sealedMagic
const headerLength = magic.length + 8

function headerOf(key: SecretKey): Buffer {
  return Buffer.concat([magic, Buffer.from(key.id, 'hex')])
}

/** The header of values sealed under `keyId` (what rotate-key looks for: domain/sealed/sealed.ts). */
export function sealedHeader(keyId: string): Buffer {
  return Buffer.concat([magic, Buffer.from(keyId, 'hex')])
}

/** The key id a sealed value names, or undefined for a value of the format before key ids. */
export function sealedKeyId(sealed: Buffer | Uint8Array): string | undefined {
  const bytes = Buffer.from(sealed)
  if (bytes.length < headerLength + 28 || !bytes.subarray(0, magic.length).equals(magic))
    return undefined
  return bytes.subarray(magic.length, headerLength).toString('hex')
}

function binding(at: SealedColumn, rowKey: string): Buffer {
  return Buffer.from(`${at.table}.${at.column}:${rowKey}`, 'utf8')
}

function decrypt(key: Buffer, nonce: Buffer, tag: Buffer, body: Buffer, aad?: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', key, nonce)
  if (aad) decipher.setAAD(aad)
  decipher.setAuthTag(tag)
  return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8')
}

/**
 * Seals and opens with a keyring (or one key). Sealed form: "OSK", version 1, the key id (8 bytes), a
 * 12-byte nonce, the 16-byte tag, the ciphertext; the header and the row are the additional data. The
 * form before it (nonce, tag, ciphertext; no additional data) still opens.
 */
export function createSealer(keys: Keyring | Buffer): Sealer {
  const keyring = Buffer.isBuffer(keys) ? keyringOf(keys) : keys
  function openLegacy(bytes: Buffer): string {
    for (const { key } of keyring.all) {
      try {
        return decrypt(key, bytes.subarray(0, 12), bytes.subarray(12, 28), bytes.subarray(28))
      } catch {
        // another key of the ring, or not this form at all
      }
    }
    throw new Error('a sealed value opens under no key of the keyring')
  }
  return {
    keyring,
    seal(plain, at, rowKey) {
      const key = keyring.current
      const header = headerOf(key)
      const nonce = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key.key, nonce)
      cipher.setAAD(Buffer.concat([header, binding(at, rowKey)]))
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
      return Buffer.concat([header, nonce, cipher.getAuthTag(), body])
    },
    open(sealed, at, rowKey) {
      const bytes = Buffer.from(sealed)
      const id = sealedKeyId(bytes)
      if (id === undefined) return openLegacy(bytes)
      // Sealed under a key this process has not read yet (rotate-key added it): read the keys again.
      if (!keyring.find(id)) keyring.reload(false)
      const key = keyring.find(id)
      const aad = Buffer.concat([bytes.subarray(0, headerLength), binding(at, rowKey)])
      try {
        if (!key) throw new Error(`sealed under key ${id}, which is not in the keyring`)
        return decrypt(
          key.key,
          bytes.subarray(headerLength, headerLength + 12),
          bytes.subarray(headerLength + 12, headerLength + 28),
          bytes.subarray(headerLength + 28),
          aad,
        )
      } catch (err) {
        // One value of the old form in 2^32 starts as this form does: it opens as the old form.
        try {
          return openLegacy(bytes)
        } catch {
          throw err
        }
      }
    },
    isCurrent(sealed) {
      return sealedKeyId(sealed) === keyring.current.id
    },
  }
}
