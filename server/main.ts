import { exitQuietlyWhenReaderGoes } from '../shared/pipes.js'
import { buildOsd, runOsd, stopOnSignals } from './cli.js'

// `osd admin ... | head -1` ends quietly, exit 0, once the reader has gone (issue 27), as osctl does;
// a SIGINT or SIGTERM stops the command, which closes what it opened (stopOnSignals). Not `osd serve`:
// its stdout carries the logs, and its signals drain it (server/cli.ts).
if (process.argv[2] !== 'serve') {
  exitQuietlyWhenReaderGoes()
  stopOnSignals()
}

void runOsd(buildOsd(), process.argv.slice(2)).then((code) => {
  if (code !== 0) process.exit(code)
})
