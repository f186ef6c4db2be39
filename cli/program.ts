import { Command, type ErrorOptions } from 'commander'
import { packageVersion } from '../shared/paths.js'
import type { MakeDeps } from './command.js'
import { registerApi } from './commands/api.js'
import { registerAuth } from './commands/auth.js'
import { registerBlockers } from './commands/blockers.js'
import { registerCatalog } from './commands/catalog.js'
import { registerChat, registerChats } from './commands/chats.js'
import { registerCompletion } from './commands/completion.js'
import { registerConnections } from './commands/connections.js'
import { registerConsent } from './commands/consent.js'
import { registerEnterprise, registerTopLevelWebhookSecret } from './commands/enterprise.js'
import { registerEnterprises } from './commands/enterprises.js'
import { registerExecutions } from './commands/executions.js'
import { registerGates } from './commands/gates.js'
import { registerHealth } from './commands/health.js'
import { registerLlm } from './commands/llm.js'
import { registerPlans } from './commands/plans.js'
import { registerSpend } from './commands/spend.js'
import { registerTools } from './commands/tools.js'
import { registerMembers } from './commands/members.js'
import { registerMemory, registerTaskMemory } from './commands/memory.js'
import { registerRecommendations, registerTaskVerbs } from './commands/recommendations.js'
import { registerOrg } from './commands/org.js'
import { registerRoles } from './commands/roles.js'
import { registerRuns } from './commands/runs.js'
import { registerTasks } from './commands/tasks.js'
import { registerTeams } from './commands/teams.js'
import { registerTokens } from './commands/tokens.js'
import { registerUsers } from './commands/users.js'
import { registerProfile } from './commands/profile.js'
import { registerWebhooks } from './commands/webhooks.js'

/**
 * A command whose usage errors are one line and where to read more, never the whole help (issue 27):
 * `error: unknown command "taks" (did you mean "tasks"?)` then `run "osctl --help" for the commands`.
 * Commander makes every subcommand with createCommand, so the whole tree answers so.
 */
export class OsctlCommand extends Command {
  override createCommand(name?: string): Command {
    return new OsctlCommand(name)
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

/** The whole command tree; `makeDeps` is swapped in tests. */
export function buildProgram(makeDeps: MakeDeps): Command {
  const program = new OsctlCommand('osctl')
    .description('osctl: drive osd, the task automation service, from a terminal or a pipeline')
    .version(packageVersion)
    .option('--url <url>', 'API base URL ending in /v1 (env OSCTL_URL)')
    .option('--token <token>', 'API token (env OSCTL_TOKEN)')
    .option('--profile <name>', 'profile to use (env OSCTL_PROFILE)')
    .option('--json', 'print the API JSON unchanged')
    .configureHelp({ sortSubcommands: false })
    // Set before the subcommands exist: commander copies it to each as it is made. run.ts maps the
    // thrown errors to exit codes (2 for usage).
    .exitOverride()

  registerAuth(program, makeDeps)
  registerProfile(program, makeDeps)
  registerEnterprises(program, makeDeps)
  registerTokens(program, makeDeps)
  registerUsers(program, makeDeps)
  registerConnections(program, makeDeps)
  registerConsent(program, makeDeps)
  registerHealth(program, makeDeps)
  registerEnterprise(program, makeDeps)
  registerTeams(program, makeDeps)
  registerMembers(program, makeDeps)
  registerRoles(program, makeDeps)
  registerOrg(program, makeDeps)
  const tasks = registerTasks(program, makeDeps)
  registerTaskMemory(tasks, makeDeps)
  registerTaskVerbs(tasks, makeDeps)
  registerRuns(program, makeDeps)
  registerBlockers(program, makeDeps)
  registerExecutions(program, makeDeps)
  registerWebhooks(program, makeDeps)
  registerGates(program, makeDeps)
  registerChats(program, makeDeps)
  registerChat(program, makeDeps)
  registerTools(program, makeDeps)
  registerLlm(program, makeDeps)
  registerSpend(program, makeDeps)
  registerPlans(program, makeDeps)
  registerMemory(program, makeDeps)
  registerCatalog(program, makeDeps)
  registerRecommendations(program, makeDeps)
  registerTopLevelWebhookSecret(program, makeDeps)
  registerApi(program, makeDeps)
  registerCompletion(program, makeDeps)
  return program
}
