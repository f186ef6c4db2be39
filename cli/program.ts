import { Command, Help, type ErrorOptions } from 'commander'
import { packageVersion } from '../shared/paths.js'
import type { MakeDeps } from './command.js'
import { about } from './commands/about.js'

type Register = (program: Command, makeDeps: MakeDeps) => void

/** A top-level command as `osctl --help` lists it, and the loader of what registers it. */
export interface TopLevelCommand {
  name: keyof typeof about
  /** Its term in that list where it is more than its name: its arguments, `[options]` if it has some. */
  term?: string
  load(): Promise<Register>
}

/**
 * osctl's top-level commands in the order of `osctl --help`. A command line loads the module of the
 * command it names and no other (issue 30: building the whole tree was half of `osctl --help`'s start).
 * test/cli/program.test.ts checks each entry against what its module registers.
 */
export const topLevelCommands: TopLevelCommand[] = [
  { name: 'auth', load: async () => (await import('./commands/auth.js')).registerAuth },
  { name: 'profile', load: async () => (await import('./commands/profile.js')).registerProfile },
  {
    name: 'enterprises',
    load: async () => (await import('./commands/enterprises.js')).registerEnterprises,
  },
  { name: 'tokens', load: async () => (await import('./commands/tokens.js')).registerTokens },
  { name: 'users', load: async () => (await import('./commands/users.js')).registerUsers },
  {
    name: 'connections',
    load: async () => (await import('./commands/connections.js')).registerConnections,
  },
  { name: 'consent', load: async () => (await import('./commands/consent.js')).registerConsent },
  { name: 'health', load: async () => (await import('./commands/health.js')).registerHealth },
  {
    name: 'enterprise',
    load: async () => (await import('./commands/enterprise.js')).registerEnterprise,
  },
  { name: 'teams', load: async () => (await import('./commands/teams.js')).registerTeams },
  { name: 'members', load: async () => (await import('./commands/members.js')).registerMembers },
  { name: 'roles', load: async () => (await import('./commands/roles.js')).registerRoles },
  { name: 'org', load: async () => (await import('./commands/org.js')).registerOrg },
  {
    name: 'tasks',
    // `tasks memory`, `tasks improve` and `tasks recommendations` live with memory and with
    // recommendations, but hang under `osctl tasks`: they load with it, not with their modules' own
    // commands.
    load: async () => {
      const [tasks, memory, recommendations] = await Promise.all([
        import('./commands/tasks.js'),
        import('./commands/memory.js'),
        import('./commands/recommendations.js'),
      ])
      return (program, makeDeps) => {
        const command = tasks.registerTasks(program, makeDeps)
        memory.registerTaskMemory(command, makeDeps)
        recommendations.registerTaskVerbs(command, makeDeps)
      }
    },
  },
  { name: 'runs', load: async () => (await import('./commands/runs.js')).registerRuns },
  { name: 'blockers', load: async () => (await import('./commands/blockers.js')).registerBlockers },
  {
    name: 'executions',
    load: async () => (await import('./commands/executions.js')).registerExecutions,
  },
  { name: 'webhooks', load: async () => (await import('./commands/webhooks.js')).registerWebhooks },
  { name: 'events', load: async () => (await import('./commands/events.js')).registerEvents },
  {
    name: 'subscriptions',
    load: async () => (await import('./commands/subscriptions.js')).registerSubscriptions,
  },
  { name: 'gates', load: async () => (await import('./commands/gates.js')).registerGates },
  { name: 'chats', load: async () => (await import('./commands/chats.js')).registerChats },
  {
    name: 'chat',
    term: 'chat [member]',
    load: async () => (await import('./commands/chats.js')).registerChat,
  },
  { name: 'tools', load: async () => (await import('./commands/tools.js')).registerTools },
  { name: 'llm', load: async () => (await import('./commands/llm.js')).registerLlm },
  { name: 'spend', load: async () => (await import('./commands/spend.js')).registerSpend },
  { name: 'plans', load: async () => (await import('./commands/plans.js')).registerPlans },
  { name: 'memory', load: async () => (await import('./commands/memory.js')).registerMemory },
  { name: 'catalog', load: async () => (await import('./commands/catalog.js')).registerCatalog },
  {
    name: 'recommendations',
    load: async () => (await import('./commands/recommendations.js')).registerRecommendations,
  },
  {
    name: 'webhook-secret',
    load: async () => (await import('./commands/enterprise.js')).registerTopLevelWebhookSecret,
  },
  { name: 'config', load: async () => (await import('./commands/config.js')).registerConfig },
  {
    name: 'diff',
    term: 'diff [options]',
    load: async () => (await import('./commands/config.js')).registerDiff,
  },
  {
    name: 'apply',
    term: 'apply [options]',
    load: async () => (await import('./commands/config.js')).registerApply,
  },
  { name: 'wait', load: async () => (await import('./commands/wait.js')).registerWait },
  {
    name: 'api',
    term: 'api [options] <method> <path>',
    load: async () => (await import('./commands/api.js')).registerApi,
  },
  // The completion script walks the whole tree: naming it loads every command (see wanted).
  {
    name: 'completion',
    term: 'completion <shell>',
    load: async () => (await import('./commands/completion.js')).registerCompletion,
  },
]

/**
 * A command whose usage errors are one line and where to read more, never the whole help (issue 27):
 * `error: unknown command "taks" (did you mean "tasks"?)` then `run "osctl --help" for the commands`.
 * Commander makes every subcommand with createCommand, so the whole tree answers so.
 */
export class OsctlCommand extends Command {
  override createCommand(name?: string): Command {
    return new OsctlCommand(name)
  }

  override createHelp(): Help {
    return Object.assign(new OsctlHelp(), this.configureHelp())
  }

  override error(message: string, errorOptions?: ErrorOptions): never {
    return super.error(usageError(this, message, errorOptions?.code), errorOptions)
  }
}

/**
 * Commander's words for a usage error, made into one line (its suggestion moved onto the line, names
 * in double quotes, as gh prints them), and a line naming the --help that says more.
 */
export function usageError(command: Command, message: string, code?: string): string {
  const path: string[] = []
  for (let c: Command | null = command; c; c = c.parent) path.unshift(c.name())
  const name = path.join(' ')
  let line = message
    .replace(
      /\n\(Did you mean one of (.*)\?\)/,
      (_, names: string) =>
        ` (did you mean one of ${names
          .split(', ')
          .map((n) => `"${n}"`)
          .join(', ')}?)`,
    )
    .replace(/\n\(Did you mean (.*)\?\)/, ' (did you mean "$1"?)')
    .replace(/'([^']*)'/g, '"$1"')
    .replace(/\n/g, ' ')
  if (!line.startsWith('error: ')) line = `error: ${line}`
  if (code === 'commander.unknownCommand' && command.parent)
    line = line.replace(/^(error: unknown command "[^"]*")/, `$1 for "${name}"`)
  if (code === 'commander.excessArguments') line = line.replace(/ for "[^"]*"\./, ` for "${name}".`)
  const what =
    code === 'commander.unknownCommand'
      ? 'the commands'
      : code === 'commander.unknownOption'
        ? 'the options'
        : 'its usage'
  return `${line}\nrun "${name} --help" for ${what}`
}

/**
 * Lists a stub by its entry's term: a stub has none of its command's arguments or options, from
 * which commander would make the term.
 */
class OsctlHelp extends Help {
  override subcommandTerm(command: Command): string {
    return command instanceof Stub ? command.term : super.subcommandTerm(command)
  }
}

/**
 * A top-level command whose module the command line did not need: its line in `osctl --help` and a
 * name for "did you mean", nothing more. buildProgram loads the command a line names, so none runs.
 */
class Stub extends OsctlCommand {
  readonly term: string

  constructor(command: TopLevelCommand) {
    super(command.name)
    this.term = command.term ?? command.name
    this.description(about[command.name]).action(() => {
      throw new Error(`osctl ${command.name} ran without its module`)
    })
  }
}

/**
 * The entries a command line needs: the command it names (`osctl help tasks` names tasks too), every
 * one for `completion`, none when it names no command. Its operands are found as commander finds
 * them at the top: the program's options come off with their values, and an operand after `--` still
 * names a command (`osctl -- tasks` runs tasks). An option it does not know is stepped over: commander
 * then runs no command at all, and one loaded for nothing costs only time, where a stub run would fail.
 */
function wanted(program: Command, args: readonly string[]): TopLevelCommand[] {
  const valued = program.options.filter((o) => o.required).flatMap((o) => [o.short, o.long])
  const operands: string[] = []
  for (let i = 0; i < args.length && operands.length < 2; i++) {
    const arg = args[i]!
    if (arg === '--') {
      operands.push(...args.slice(i + 1))
      break
    }
    if (valued.includes(arg)) i++
    else if (arg.length < 2 || !arg.startsWith('-')) operands.push(arg)
  }
  const name = operands[0] === 'help' ? operands[1] : operands[0]
  const named = topLevelCommands.find((c) => c.name === name)
  if (!named) return []
  return named.name === 'completion' ? topLevelCommands : [named]
}

/**
 * osctl's command tree; `makeDeps` is swapped in tests. Given the command line (`argv` as
 * process.argv holds it, cli/run.ts), it loads only the modules of the command the line names and
 * stands stubs in for the other top-level commands: the help and usage errors read as with the whole
 * tree, and `osctl --help` loads no command module. Without `argv`, the whole tree (the reference,
 * tests).
 */
export async function buildProgram(makeDeps: MakeDeps, argv?: readonly string[]): Promise<Command> {
  const program = new OsctlCommand('osctl')
    .description('osctl: drive osd, the task automation service, from a terminal or a pipeline')
    .version(packageVersion)
    .option(
      '--url <url>',
      'API base URL ending in /v1; http://HOST:PORT alone gets it (env OSCTL_URL)',
    )
    .option('--token <token>', 'API token (env OSCTL_TOKEN)')
    .option('--profile <name>', 'profile to use (env OSCTL_PROFILE)')
    .option('--json', 'print the API JSON unchanged')
    .option(
      '--jq <expr>',
      "filter the JSON a command prints with a jq expression, as `--json | jq -r EXPR` (jq's own semantics: strings printed raw)",
    )
    .configureHelp({ sortSubcommands: false })
    // Set before the subcommands exist: commander copies it to each as it is made. run.ts maps the
    // thrown errors to exit codes (2 for usage).
    .exitOverride()

  const load = argv === undefined ? topLevelCommands : wanted(program, argv.slice(2))
  const registers = new Map(await Promise.all(load.map(async (c) => [c, await c.load()] as const)))
  for (const command of topLevelCommands) {
    const register = registers.get(command)
    if (register) register(program, makeDeps)
    else program.addCommand(new Stub(command).copyInheritedSettings(program))
  }
  return program
}
