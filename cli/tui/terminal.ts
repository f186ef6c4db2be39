import { CliError, exitCodes } from '../errors.js'

// A screen refuses to start without a terminal and names the verbs that do its job without one (STYLE,
// The CLI). Kept apart from the screens so a command checks this before it loads ink.

export interface Streams {
  stdin: { isTTY?: boolean }
  stdout: { isTTY?: boolean }
}

/** The verbs that do what `gates review` does, one per line, for the refusal. */
export const gateReviewInstead = [
  'osctl gates list [--task TASK] [--run RUN] [--kind tool|question]',
  'osctl gates get ID',
  'osctl gates approve ID [--note TEXT]',
  'osctl gates reject ID --note TEXT',
  'osctl gates request-changes ID --note TEXT',
  'osctl gates answer ID [--choice KEY] [--answer TEXT ...]',
]

/** The verbs that do what `chat` does, one per line, for the refusal. */
export const chatInstead = [
  'osctl chats list [--member M]',
  'osctl chats new MEMBER [--message TEXT --wait] | --create-task',
  'osctl chats get CHAT [--limit N]',
  'osctl chats export CHAT [--format md|json]',
  'osctl chats send CHAT TEXT [--wait]',
  'osctl chats decide CHAT CALL --allow|--always|--deny',
  'osctl chats answer CHAT [--gate G] [--answer TEXT ...] [--choice KEY]',
  'osctl chats close CHAT',
]

/** Throws a usage error (exit 2) unless both stdin and stdout are terminals. */
export function requireTerminal(
  screen: string,
  instead: readonly string[],
  streams: Streams = { stdin: process.stdin, stdout: process.stdout },
): void {
  if (streams.stdin.isTTY && streams.stdout.isTTY) return
  const missing = [!streams.stdin.isTTY && 'stdin', !streams.stdout.isTTY && 'stdout'].filter(
    (name): name is string => Boolean(name),
  )
  throw new CliError(
    `${screen} is interactive and needs a terminal, but ${missing.join(' and ')} ` +
      `${missing.length > 1 ? 'are not terminals' : 'is not a terminal'}. ` +
      `These verbs do the same job without one:\n${instead.map((v) => `  ${v}`).join('\n')}`,
    exitCodes.usage,
  )
}

/**
 * Ink draws only the last frame when the environment names a CI (is-in-ci, read once as ink loads), so
 * a screen would stay blank until it quits. A screen runs only on a terminal, where every frame must be
 * drawn whatever CI says; call this before ink is imported.
 */
export function drawEveryFrame(env: NodeJS.ProcessEnv = process.env): void {
  for (const name of ['CI', 'CONTINUOUS_INTEGRATION']) if (name in env) env[name] = 'false'
}
