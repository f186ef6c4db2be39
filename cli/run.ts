import { buildProgram } from './program.js'
import { report } from './report.js'

// Every osctl command but `--version` starts here (main.ts). The tree holds the modules of the command
// the line names and no others (program.ts). deps.js brings the HTTP client and the profile store
// (conf, with ajv): loaded when a command acts, so --help and usage errors start without them; the
// store only when the command reads a profile (cli/deps.ts loadDeps).
const program = await buildProgram(
  async (globals, command) => (await import('./deps.js')).loadDeps(globals, command),
  process.argv,
)

try {
  // `osctl` alone asked for nothing but the help: on stdout, where `osctl | less` reads it (commander
  // writes it to stderr as for a usage error; issue 51).
  if (process.argv.length <= 2) program.outputHelp()
  else await program.parseAsync(process.argv)
} catch (err) {
  process.exitCode = report(err, Boolean(program.opts().json))
}
