import { existsSync, readdirSync } from 'node:fs'
import { chown, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { freePort } from '../../server/db/embedded.js'

// A PostgreSQL primary with a streaming standby, from Debian's `postgresql` binaries (.ci/run installs
// them when they are missing), for the failover test (issue 34). Replication is synchronous: a commit the
// primary acknowledged is on the standby, so a failover loses nothing a client was told. The standby
// runs without synchronous_standby_names, so once promoted it does not wait for a standby of its own.

/** The newest Debian PostgreSQL's bin directory, if there is one. */
export function debianPostgres(): string | undefined {
  const base = '/usr/lib/postgresql'
  if (!existsSync(base)) return undefined
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(a) - Number(b))
  return versions.length ? join(base, versions.at(-1)!, 'bin') : undefined
}

export interface Cluster {
  /** postgres://osd@127.0.0.1:<primary>,127.0.0.1:<standby>/osd?target_session_attrs=read-write */
  url: string
  primaryPort: number
  standbyPort: number
  /** The primary dies at once (pg_ctl stop -m immediate): no shutdown checkpoint, as in a crash. */
  killPrimary(): Promise<void>
  /** The standby becomes the primary. */
  promoteStandby(): Promise<void>
  close(): Promise<void>
}

export async function startCluster(bin: string): Promise<Cluster> {
  const dir = await mkdtemp(join(tmpdir(), 'osd-failover-'))
  const root = process.getuid?.() === 0
  if (root) await execa('chown', ['-R', 'postgres', dir])
  // PostgreSQL refuses to run as root: as root, its commands run as the postgres user.
  const run = (cmd: string, args: string[]) =>
    root
      ? execa('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args])
      : execa(join(bin, cmd), args)
  const primary = join(dir, 'primary')
  const standby = join(dir, 'standby')
  const primaryPort = await freePort()
  const standbyPort = await freePort()
  await run('initdb', ['-D', primary, '-U', 'osd', '--auth=trust'])
  const common = ['-k', dir, '-c', 'max_connections=100', '-c', 'wal_level=replica']
  await run('pg_ctl', [
    '-D',
    primary,
    '-l',
    join(dir, 'primary.log'),
    '-w',
    '-o',
    [...common, '-p', String(primaryPort), '-c', "synchronous_standby_names='*'"].join(' '),
    'start',
  ])
  await run('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primaryPort),
    '-U',
    'osd',
    '-D',
    standby,
    '-X',
    'stream',
    '-R',
  ])
  await run('pg_ctl', [
    '-D',
    standby,
    '-l',
    join(dir, 'standby.log'),
    '-w',
    '-o',
    [...common, '-p', String(standbyPort), '-c', "synchronous_standby_names=''"].join(' '),
    'start',
  ])
  await run('createdb', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'osd', 'osd'])
  const stop = (data: string) =>
    run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']).catch(() => undefined)
  return {
    url: `postgres://osd@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/osd?target_session_attrs=read-write`,
    primaryPort,
    standbyPort,
    killPrimary: async () => void (await stop(primary)),
    promoteStandby: async () => void (await run('pg_ctl', ['-D', standby, '-w', 'promote'])),
    async close() {
      await stop(primary)
      await stop(standby)
      if (root) await chown(dir, 0, 0).catch(() => undefined)
      await rm(dir, { recursive: true, force: true })
    },
  }
}
