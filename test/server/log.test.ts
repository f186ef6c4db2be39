import { spawnSync } from 'node:child_process'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { Writable } from 'node:stream'
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { projectRoot } from '../../shared/paths.js'
import { loadConfig } from '../../server/config.js'
import { createLogger, LineBuffer } from '../../server/log.js'
import { startDaemon } from '../../server/serve.js'
import { createTestDatabase } from '../helpers/db.js'

// The daemon's log destination (server/log.ts): lines gathered and written 16 KB at a time, in order,
// the start's at once, and nothing held is lost when the process ends.

function collector() {
  const chunks: string[] = []
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString())
      done()
    },
  })
  return { out, chunks }
}

describe('the log destination', () => {
  it('writes lines together once they reach 16 KB, in order, and what is left when flushed', async () => {
    const { out, chunks } = collector()
    const log = createLogger('info', new LineBuffer(out))
    for (let i = 0; i < 3; i++) log.info({ i }, 'short')
    expect(chunks).toEqual([])
    for (let i = 3; i < 200; i++) log.info({ i, pad: 'x'.repeat(60) }, 'longer')
    expect(chunks.length).toBeGreaterThan(0)
    expect(chunks.every((c) => c.length >= 16_384)).toBe(true)
    await new Promise<void>((resolve) => log.flush(() => resolve()))
    const lines = chunks
      .join('')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number })
    expect(lines.map((l) => l.i)).toEqual([...Array(200).keys()])
  })

  it('is written at once for the start\'s lines: "osd started" is out when the daemon answers', async () => {
    // The buffer writes every half second; a supervisor that waits for the start line waited up to
    // that long with osd already listening (server/serve.ts flushes it).
    const { out, chunks } = collector()
    const db = await createTestDatabase()
    const config = loadConfig(
      { port: 0, host: '127.0.0.1', role: 'api', dataDir: await mkdtemp(join(tmpdir(), 'osd-')) },
      { DATABASE_URL: db.url, OSD_PASSWORD_COST: process.env.OSD_PASSWORD_COST },
    )
    const running = await startDaemon(config, createLogger('info', new LineBuffer(out)))
    try {
      const written = chunks.join('')
      expect(written).toContain('"msg":"database ready"')
      expect(written).toContain(`"url":"${running.url}"`)
      expect(written).toContain('"msg":"osd started"')
    } finally {
      await running.stop()
    }
  })

  it('loses no line held when the process exits without a flush', () => {
    const log = pathToFileURL(join(projectRoot, 'dist', 'server', 'log.js')).href
    const res = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { createLogger } = await import(${JSON.stringify(log)})
         const log = createLogger('info')
         log.info({ n: 1 }, 'held')
         process.exit(3)`,
      ],
      { encoding: 'utf8' },
    )
    expect(res.status).toBe(3)
    expect(JSON.parse(res.stdout)).toMatchObject({ n: 1, msg: 'held', level: 30 })
  })
})
