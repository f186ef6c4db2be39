import { existsSync } from 'node:fs'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { ConfigError, type Config } from './config.js'

/** A data dir osd cannot use through no fault of its setting (a full disk): exit 1, in one line. */
export class DataDirError extends Error {}

const setting = '--data-dir or OSD_DATA_DIR'

/**
 * Makes the embedded PostgreSQL's data dir if need be and writes a file in it, before osd serve, osd
 * migrate or osd admin starts the server there; without DATABASE_URL only. A data dir that is a file,
 * under a file, read-only, not this user's to write or on a full disk is said in one line naming the
 * setting: it was a stack from the embedded server's start (EEXIST: mkdir, EROFS: open embedded.lock).
 */
export async function checkDataDir(config: Pick<Config, 'dataDir' | 'databaseUrl'>): Promise<void> {
  if (config.databaseUrl) return
  const dir = config.dataDir
  const probe = join(dir, `.osd-write-check-${process.pid}`)
  try {
    await makeDir(dir)
    // A few bytes, not an empty file: a full disk still has room for a name.
    await writeFile(probe, 'osd\n', { mode: 0o600 })
  } catch (err) {
    throw dataDirProblem(dir, err as NodeJS.ErrnoException)
  } finally {
    await rm(probe, { force: true }).catch(() => undefined)
  }
}

/**
 * mkdir -p, failing with the error of the first directory it cannot make: Node's recursive mkdir says
 * ENOENT on a read-only file system, where a plain mkdir of the first missing one says EROFS.
 */
async function makeDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    let missing = dir
    while (dirname(missing) !== missing && !existsSync(dirname(missing))) missing = dirname(missing)
    // Its own error when it fails; made after all (a directory made meanwhile), the rest follows.
    await mkdir(missing, { mode: 0o700 })
    await mkdir(dir, { recursive: true, mode: 0o700 })
  }
}

function dataDirProblem(dir: string, err: NodeJS.ErrnoException): Error {
  const said = (why: string) => `the data dir ${dir} (${setting}) ${why}`
  switch (err.code) {
    case 'EEXIST':
    case 'ENOTDIR':
      return new ConfigError(said('is a file, or under one: give a directory'))
    case 'EACCES':
    case 'EPERM':
      return new ConfigError(
        said(
          "cannot be written by this user: give a directory it can write, or change the directory's owner",
        ),
      )
    case 'EROFS':
      return new ConfigError(said('is on a read-only file system: give a directory osd can write'))
    case 'ENOSPC':
    case 'EDQUOT':
      return new DataDirError(said('is on a full disk: free some space there, or give another'))
    default:
      return new DataDirError(said(`cannot be made or written: ${err.message}`))
  }
}
