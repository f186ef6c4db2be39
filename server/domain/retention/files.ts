import { constants } from 'node:fs'
import { mkdir, open, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { gunzip, gzip } from 'node:zlib'
import { ApiError } from '../../../shared/errors.js'

// The archive's files (issue 46): gzip JSON lines, one file per enterprise and UTC day,
// <archive dir>/<enterprise id>/<YYYY-MM-DD>.jsonl.gz. Each batch the pass moves is one gzip member
// appended to the day's file; members concatenated make one valid gzip file (RFC 1952), so
// `zcat FILE` reads a whole day. The database keeps each member's offset and length, so a read inflates
// one member, never the file.

const gzipAsync = promisify(gzip)
const gunzipAsync = promisify(gunzip)

/** A batch's lines should inflate in well under 200 ms when read back: members stop near this size. */
export const memberTargetBytes = 4 * 1024 * 1024

/** The file of an enterprise's day, relative to the archive dir (what archive_members keeps). */
export function archiveFile(enterpriseId: string, at: Date): string {
  return join(enterpriseId, `${at.toISOString().slice(0, 10)}.jsonl.gz`)
}

export interface WrittenMember {
  offset: number
  length: number
}

/**
 * Writes members (each a group of JSON lines) to the end of `file`, after the last member committed
 * (`committedEnd`: what archive_members says; bytes past it are a batch's that rolled back, and are
 * overwritten), and makes them durable: the file and its directory are fsynced before this returns, so
 * the rows they hold may be deleted. The caller holds the enterprise's retention lock: one writer per
 * file. Answers where each member went.
 */
export async function appendMembers(
  archiveDir: string,
  file: string,
  committedEnd: number,
  members: string[][],
): Promise<WrittenMember[]> {
  const path = join(archiveDir, file)
  const dir = dirname(path)
  const created = await mkdir(dir, { recursive: true, mode: 0o700 })
  const bodies = await Promise.all(members.map((lines) => gzipAsync(Buffer.from(lines.join('')))))
  const handle = await open(path, constants.O_RDWR | constants.O_CREAT, 0o600)
  const written: WrittenMember[] = []
  try {
    // A file shorter than the database says was not written by this archive dir (another machine's,
    // DATABASE_URL shared without shared storage): the members go where this file ends.
    let offset = Math.min((await handle.stat()).size, committedEnd)
    await handle.truncate(offset)
    for (const body of bodies) {
      for (let done = 0; done < body.length;) {
        const { bytesWritten } = await handle.write(body, done, body.length - done, offset + done)
        done += bytesWritten
      }
      written.push({ offset, length: body.length })
      offset += body.length
    }
    await handle.sync()
  } finally {
    await handle.close()
  }
  // The directory entry of a new file (and of a new enterprise directory) must survive a crash too.
  await syncDir(dir)
  if (created) await syncDir(archiveDir)
  return written
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** The lines of one member, inflated. */
export async function readMember(
  archiveDir: string,
  member: { file: string; byteOffset: number; byteLength: number },
): Promise<string> {
  const path = join(archiveDir, member.file)
  let handle
  try {
    handle = await open(path, constants.O_RDONLY)
  } catch {
    throw unavailable(member.file)
  }
  try {
    const body = Buffer.alloc(member.byteLength)
    const { bytesRead } = await handle.read(body, 0, member.byteLength, member.byteOffset)
    if (bytesRead !== member.byteLength) throw new Error(`${path} ends before its member does`)
    return (await gunzipAsync(body)).toString('utf8')
  } catch {
    throw unavailable(member.file)
  } finally {
    await handle.close()
  }
}

/** The file is named as the archive dir holds it, never with the server's own path. */
function unavailable(file: string): ApiError {
  return new ApiError(
    'archive_unavailable',
    `It is archived in ${file}, which this osd process cannot read: every osd process must see ` +
      'the same OSD_ARCHIVE_DIR (ask the operator).',
  )
}

/** Whether the archive dir can be written: an engine says so at start rather than at its first pass. */
export async function archiveDirProblem(archiveDir: string): Promise<string | undefined> {
  try {
    await mkdir(archiveDir, { recursive: true, mode: 0o700 })
    const info = await stat(archiveDir)
    return info.isDirectory() ? undefined : `${archiveDir} is not a directory`
  } catch (err) {
    return `${archiveDir}: ${(err as Error).message}`
  }
}
