import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

// Credentials the service must use again later (model keys, tool tokens, replayable webhook bodies)
// are encrypted at rest with AES-256-GCM under a server key (DESIGN 3): OSD_SECRET_KEY (32 bytes, in
// base64 or hex), or a key generated once into the data dir. Processes sharing a database on several
// machines must share OSD_SECRET_KEY.

export interface Sealer {
  seal(plain: string): Buffer
  open(sealed: Buffer | Uint8Array): string
}

export function secretKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  const given = env.OSD_SECRET_KEY
  if (given) {
    const key = /^[0-9a-f]{64}$/i.test(given)
      ? Buffer.from(given, 'hex')
      : Buffer.from(given, 'base64')
    if (key.length !== 32)
      throw new Error('OSD_SECRET_KEY must be 32 bytes, in hex (64 characters) or base64')
    return key
  }
  const file = join(dataDir, 'secret.key')
  try {
    return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')
  } catch {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    const key = randomBytes(32)
    try {
      writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
      return key
    } catch {
      // Another process wrote it first: use that one.
      return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')
    }
  }
}

/** Sealed form: 12-byte nonce, 16-byte tag, ciphertext. */
export function createSealer(key: Buffer): Sealer {
  return {
    seal(plain) {
      const nonce = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key, nonce)
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
      return Buffer.concat([nonce, cipher.getAuthTag(), body])
    },
    open(sealed) {
      const bytes = Buffer.from(sealed)
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, 12))
      decipher.setAuthTag(bytes.subarray(12, 28))
      return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8')
    },
  }
}
