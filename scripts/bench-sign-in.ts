// npm run bench:sign-in: what one sign-in costs before and after issue 45 raised the password hashes
// from scrypt N = 2^15 to OWASP's minimum, 2^17 (r = 8, p = 1 both). Two `osd serve` processes on one
// database, the first hashing at 2^15 (OSD_PASSWORD_COST=15, as osd did before) and the second at 2^17
// (the default now). Each round, taken in turn so a load that comes and goes falls on each alike:
//
// - before: POST /v1/auth/login of a person whose hash is 2^15, on the 2^15 process;
// - after: the same of a person whose hash is 2^17, on the 2^17 process;
// - upgrade: the first sign-in of a 2^15 hash on the 2^17 process, which checks the password at 2^15
//   and stores a hash made again at 2^17 before it answers (one sign-in per person: the next is
//   "after");
//
// and beside them one scrypt hash at each cost in this process, without HTTP or the database. Prints
// median and p90 wall time in ms of BENCH_RUNS (default 10) rounds after a warm-up, and the median CPU
// ms of each (of this process for scrypt alone, of the osd processes for a sign-in, from /proc): on a
// machine others load, the wall time grows with their load and the CPU time hardly does. Reports;
// asserts nothing.
import { randomBytes } from 'node:crypto'
import {
  createUserWithHash,
  hashPassword,
  setMembership,
  usePasswordCost,
} from '../server/domain/people/index.js'
import { freePort } from '../server/db/embedded.js'
import { benchDaemon, median, percentile } from './bench-lib.js'

const runs = Number(process.env.BENCH_RUNS ?? 10)
const password = 'the password of the bench person'

const daemon = await benchDaemon({ OSD_PASSWORD_COST: '15' })
try {
  const port = await freePort()
  await daemon.start(['--port', String(port)], { OSD_PASSWORD_COST: '17' })
  const before = daemon.url
  const after = `http://127.0.0.1:${port}/v1`
  const [enterprise] = await daemon.sql<{ id: string }[]>`
    select id from enterprises where slug = ${daemon.enterpriseSlug}`

  /** A hash of the password at 2^log2N, as osd makes it. */
  async function hashAt(log2N: number): Promise<string> {
    usePasswordCost(log2N)
    return hashPassword(password)
  }
  const hash15 = await hashAt(15)
  const hash17 = await hashAt(17)

  /** A member of the bench's enterprise whose stored hash is `passwordHash`; answers the email. */
  async function person(passwordHash: string): Promise<string> {
    const email = `bench-${randomBytes(6).toString('hex')}@example.com`
    const user = await createUserWithHash(daemon.sql, { email, passwordHash })
    await setMembership(daemon.sql, enterprise!.id, user.id, 'member')
    return email
  }

  interface Took {
    wall: number
    cpu: number
  }

  /** Wall and osd CPU time of one POST /v1/auth/login, in ms; anything but 200 stops the bench. */
  async function signIn(url: string, email: string): Promise<Took> {
    const cpu = (await daemon.cpu()).osd
    const start = performance.now()
    const res = await fetch(`${url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    })
    const body = await res.text()
    const wall = performance.now() - start
    if (res.status !== 200) throw new Error(`sign-in at ${url}: ${res.status} ${body}`)
    return { wall, cpu: (await daemon.cpu()).osd - cpu }
  }

  /** Wall and CPU time of one scrypt hash in this process at 2^log2N, in ms. */
  async function scryptAt(log2N: number): Promise<Took> {
    usePasswordCost(log2N)
    const cpu = process.cpuUsage()
    const start = performance.now()
    await hashPassword(password)
    const wall = performance.now() - start
    const used = process.cpuUsage(cpu)
    return { wall, cpu: (used.user + used.system) / 1000 }
  }

  const old = await person(hash15)
  const current = await person(hash17)
  const upgrading = await Promise.all(Array.from({ length: runs + 1 }, () => person(hash15)))

  const cases: Record<string, Took[]> = {
    'scrypt 2^15 alone': [],
    'scrypt 2^17 alone': [],
    'sign-in before (2^15)': [],
    'sign-in after (2^17)': [],
    'sign-in upgrading 2^15': [],
  }
  const round = async (i: number) => [
    await scryptAt(15),
    await scryptAt(17),
    await signIn(before, old),
    await signIn(after, current),
    await signIn(after, upgrading[i]!),
  ]
  await round(runs) // warm-up: the last upgrading person
  for (let i = 0; i < runs; i++)
    (await round(i)).forEach((ms, j) => Object.values(cases)[j]!.push(ms))

  const [upgraded] = await daemon.sql<{ hash: string }[]>`
    select password_hash as hash from users where email = ${upgrading[0]!}`
  console.log(`${runs} rounds after a warm-up (node ${process.version})`)
  console.log(
    `${'case'.padEnd(26)}${'median ms'.padStart(11)}${'p90 ms'.padStart(9)}${'CPU ms'.padStart(9)}`,
  )
  for (const [name, took] of Object.entries(cases)) {
    const wall = took.map((t) => t.wall)
    console.log(
      name.padEnd(26) +
        median(wall).toFixed(1).padStart(11) +
        percentile(wall, 90).toFixed(1).padStart(9) +
        median(took.map((t) => t.cpu))
          .toFixed(0)
          .padStart(9),
    )
  }
  console.log(
    `an upgraded hash is stored as ${upgraded!.hash.split('$').slice(0, 4).join('$')}$...`,
  )
} finally {
  await daemon.close()
}
