import { setFlagsFromString } from 'node:v8'
import { packageVersion } from '../shared/paths.js'
import { exitQuietlyWhenReaderGoes } from '../shared/pipes.js'

// A pipe whose reader has gone (`osctl ... | head -1`) ends any command quietly, exit 0 (issue 27):
// set before anything is written, --version and --help included.
exitQuietlyWhenReaderGoes()

// The screens (ink) draw with React's production build: without NODE_ENV, `react` loads its
// development build, which checks and warns as it renders (about 1.5 s of a chat screen test's 5).
// A NODE_ENV set by the person is theirs.
process.env.NODE_ENV ??= 'production'

// WebAssembly is compiled by V8's baseline compiler only. By default V8 compiled each module again with
// its optimising compiler on other threads, and the process waited for that before it could exit:
// undici's HTTP parser (llhttp), in every command that asks osd something, and jq's. `osctl health`
// took 0.40 s of a core and of the clock, 0.31 with this; the few answers of a command parse as fast.
setFlagsFromString('--liftoff-only')

// osctl starts for every command a pipeline runs. `osctl --version` answers before the command tree
// (commander and every command module) is loaded, with the line commander prints for it; anything else
// goes to run.js.
const args = process.argv.slice(2)
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  process.stdout.write(`${packageVersion}\n`)
} else if (args[0] === '__complete') {
  // What the completion script asks for as Tab is pressed (cli/complete.ts): no command tree.
  await (await import('./complete.js')).runComplete(args.slice(1), process.stdout)
} else {
  await import('./run.js')
}
