import { afterEachFile } from './helpers/after-file.js'

// Before every test file (vitest.config.ts setupFiles).
afterEachFile()
