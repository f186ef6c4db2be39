import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The project root: the nearest directory above this module with a package.json. Code runs both from
 * its sources (tests) and from dist/ (built), so paths to package.json and migrations/ are found, not
 * assumed.
 */
export const projectRoot: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('package.json not found above ' + import.meta.url)
    dir = parent
  }
  return dir
})()

export const packageVersion: string = (
  JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string }
).version
