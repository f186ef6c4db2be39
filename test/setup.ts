import { afterAll } from 'vitest'
import { hashing, passwordCost } from '../server/domain/people/index.js'
import { afterEachFile } from './helpers/after-file.js'

// Before every test file (vitest.config.ts setupFiles). The files of a worker share its modules, so
// each leaves the process-wide settings a daemon or a test may change as it found them: an osd
// started in process sets the password cost from OSD_PASSWORD_COST (10 in the suite), as a process
// of its own does once at its start.
// process.env too: vitest leaves what a file sets there to the next files of its worker (the
// OSD_MAX_EXECUTION_RUNS of executions.test.ts bounded their executions, and their osd processes').
const found = {
  passwordLog2N: passwordCost.log2N,
  hashing: { ...hashing },
  env: { ...process.env },
}
afterAll(() => {
  passwordCost.log2N = found.passwordLog2N
  Object.assign(hashing, found.hashing)
  for (const key of Object.keys(process.env)) if (!(key in found.env)) delete process.env[key]
  for (const [key, value] of Object.entries(found.env))
    if (process.env[key] !== value) process.env[key] = value
})
afterEachFile()
