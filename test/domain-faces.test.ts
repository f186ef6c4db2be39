import { readFileSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { expect, it } from 'vitest'

// Faces that say what they export (issue 43; STYLE: concept folders with faces): each concept of
// server/domain is reached through its index.ts, which names what the rest of osd may use, grouped by
// who uses it. `export *` would hand every internal on (a lock, a reservation's bookkeeping) to any
// importer, and the face would say nothing of who depends on what.

const domain = resolve(import.meta.dirname, '..', 'server', 'domain')

it('no domain face re-exports a module whole: every name it hands on is named', () => {
  const faces = readdirSync(domain, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(domain, entry.name, 'index.ts'))
  expect(faces.length).toBeGreaterThan(10)
  const whole = faces.filter((face) =>
    /^\s*export\s+(type\s+)?\*/m.test(readFileSync(face, 'utf8')),
  )
  expect(whole.map((face) => face.slice(domain.length + 1))).toEqual([])
})
