import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import type { Db } from '../../db/sql.js'

// Passwords (DESIGN 8): scrypt, memory-hard, run on libuv's thread pool so a login does not stop the event
// loop. The stored string names its parameters, so they can be raised without breaking old hashes:
// scrypt$<log2 N>$<r>$<p>$<salt>$<hash>, base64. N = 2^17, r = 8, p = 1 is OWASP's minimum for scrypt
// (issue 45; 2^15 before): 128 MiB per hash. A hash made with weaker parameters is made again with these
// at the person's next successful sign-in (upgradePasswordHash).

/**
 * log2 of scrypt's N for a new hash: 17, OWASP's minimum, unless the process's OSD_PASSWORD_COST says
 * otherwise (set once at start: usePasswordCost). An object so that the tests of what counts sign-ins
 * (lock-outs, the queue: dozens of hashes each) lower it, as they lower `hashing`: they are about
 * counting, not cost (test/helpers/people.ts cheapPasswordHashes).
 */
export const passwordCost = { log2N: 17 }

/** The cost of this process's new hashes, from its configuration (OSD_PASSWORD_COST). */
export function usePasswordCost(log2N: number): void {
  passwordCost.log2N = log2N
}
const r = 8
const p = 1
const keyLength = 32

export const passwordLimits = { min: 12, max: 1024 } as const

/**
 * At most this many hashes at once per process, and at most `waiting` more queued: beyond that a sign-in
 * is answered 429 sign_in_busy at once, so a flood of sign-ins with made-up emails cannot take the memory
 * or the pool. One at a time: each takes 128 MiB and a thread of libuv's pool (which file and DNS work
 * share) for a few hundred ms of a core, and sign-ins are rare; two would double the memory (256 MiB)
 * for a throughput people never need. The queue holds what one slot clears in a few seconds.
 * The queue is shared fairly between clients (issue 44): each has a queue of its own, served in turn,
 * and when the whole is full a newcomer takes the place of the newest of the client holding the most,
 * so a flood from one address never refuses a sign-in from another.
 */
export const hashing = { atOnce: 1, waiting: 16 }
let running = 0
let queued = 0
/** Waiting hashes by client, in the order their turns come. */
const queues = new Map<string, { resolve: () => void; reject: (err: unknown) => void }[]>()

const busy = () =>
  new ApiError('sign_in_busy', 'Too many sign-ins at once; try again in a second.', {
    retryAfterSeconds: 1,
  })

/** A slot to hash in: at once, or when `client`'s turn comes. */
async function acquire(client: string): Promise<void> {
  if (running < hashing.atOnce) {
    running++
    return
  }
  if (queued >= hashing.waiting) {
    let largest: string | undefined
    for (const [key, list] of queues)
      if (largest === undefined || list.length > queues.get(largest)!.length) largest = key
    const mine = queues.get(client)?.length ?? 0
    // This client already holds as many as any other: the refusal is its own.
    if (largest === undefined || queues.get(largest)!.length <= mine + 1) throw busy()
    const list = queues.get(largest)!
    list.pop()!.reject(busy())
    queued--
    if (list.length === 0) queues.delete(largest)
  }
  queued++
  await new Promise<void>((resolve, reject) => {
    const list = queues.get(client)
    if (list) list.push({ resolve, reject })
    else queues.set(client, [{ resolve, reject }])
  })
}

/** The slot passes to the client whose turn it is (who then goes to the back), or is given back. */
function release(): void {
  const first = queues.keys().next()
  if (first.done) {
    running--
    return
  }
  const list = queues.get(first.value)!
  const next = list.shift()!
  queued--
  queues.delete(first.value)
  if (list.length > 0) queues.set(first.value, list)
  next.resolve()
}

async function derive(
  password: string,
  salt: Buffer,
  options: ScryptOptions,
  client: string,
): Promise<Buffer> {
  await acquire(client)
  try {
    // scrypt refuses to use more than maxmem: 128 * N * r bytes, with room to spare.
    const maxmem = 256 * options.N! * options.r! + 1024 * 1024
    return await new Promise((resolve, reject) =>
      scrypt(password.normalize('NFC'), salt, keyLength, { ...options, maxmem }, (err, key) =>
        err ? reject(err) : resolve(key),
      ),
    )
  } finally {
    release()
  }
}

/** Refuses a password a person should not be allowed to choose (400 invalid_request). */
export function checkNewPassword(password: string): void {
  if (password.length < passwordLimits.min || password.length > passwordLimits.max) {
    throw new ApiError(
      'invalid_request',
      `password: ${passwordLimits.min} to ${passwordLimits.max} characters.`,
    )
  }
}

/** `client`: who asks (a client address, or a person), for a fair share of the hashing slots. */
export async function hashPassword(password: string, client = ''): Promise<string> {
  const salt = randomBytes(16)
  const { log2N } = passwordCost
  const key = await derive(password, salt, { N: 2 ** log2N, r, p }, client)
  return ['scrypt', log2N, r, p, salt.toString('base64'), key.toString('base64')].join('$')
}

/** Whether the password matches the stored hash; compared in constant time. */
export async function verifyPassword(
  password: string,
  stored: string,
  client = '',
): Promise<boolean> {
  const [scheme, n, rr, pp, salt, hash] = stored.split('$')
  if (scheme !== 'scrypt' || !salt || !hash) return false
  const expected = Buffer.from(hash, 'base64')
  const key = await derive(
    password,
    Buffer.from(salt, 'base64'),
    { N: 2 ** Number(n), r: Number(rr), p: Number(pp) },
    client,
  )
  return key.length === expected.length && timingSafeEqual(key, expected)
}

/** Whether a stored hash was made with weaker parameters than a new one is. */
export function isWeakerHash(stored: string): boolean {
  const [scheme, n, rr, pp] = stored.split('$')
  return scheme !== 'scrypt' || Number(n) < passwordCost.log2N || Number(rr) < r || Number(pp) < p
}

/**
 * After a successful sign-in with `password`: a hash made with weaker parameters is replaced by one made
 * with today's (OWASP's minimum), unless the password changed meanwhile. Costs that one sign-in a hash.
 */
export async function upgradePasswordHash(
  db: Db,
  userId: string,
  password: string,
  stored: string,
): Promise<boolean> {
  if (!isWeakerHash(stored)) return false
  const upgraded = await hashPassword(password)
  const rows = await db`
    update users set password_hash = ${upgraded}
     where id = ${userId} and password_hash = ${stored}
     returning 1`
  return rows.length > 0
}

/**
 * A hash no password matches, verified when the email names nobody, so an unknown email costs a login as
 * much time as a wrong password does (the answer must not tell whether the email exists).
 */
export function unmatchableHash(): string {
  const zeros = (bytes: number) => Buffer.alloc(bytes).toString('base64')
  return `scrypt$${passwordCost.log2N}$${r}$${p}$${zeros(16)}$${zeros(keyLength)}`
}
