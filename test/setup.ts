import { afterAll } from 'vitest'
import { hashing, passwordCost } from '../server/domain/people/index.js'
import { afterEachFile } from './helpers/after-file.js'

// Before every test file (vitest.config.ts setupFiles). The files of a worker share its modules, so
// each leaves the process-wide settings a daemon or a test may change as it found them: an osd
// started in process sets the password cost from OSD_PASSWORD_COST (10 in the suite), as a process
// of its own does once at its start.
const found = { passwordLog2N: passwordCost.log2N, hashing: { ...hashing } }
afterAll(() => {
  passwordCost.log2N = found.passwordLog2N
  Object.assign(hashing, found.hashing)
})
afterEachFile()
