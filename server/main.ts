import { exitQuietlyWhenReaderGoes } from '../shared/pipes.js'
import { buildOsd, runOsd } from './cli.js'

// `osd admin ... | head -1` ends quietly, exit 0, once the reader has gone (issue 27), as osctl does.
// Not `osd serve`: its stdout carries the logs, and what a daemon does without them is another matter.
if (process.argv[2] !== 'serve') exitQuietlyWhenReaderGoes()

void runOsd(buildOsd(), process.argv.slice(2)).then((code) => {
  if (code !== 0) process.exit(code)
})
