import type { Command } from 'commander'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { about } from './about.js'

interface Node {
  path: string[]
  words: string[]
}

/** Every command path with the words that may follow it: subcommands and long flags. */
function walk(command: Command, path: string[] = []): Node[] {
  const words = [
    ...command.commands.map((c) => c.name()),
    ...command.options.map((o) => o.long).filter((l): l is string => Boolean(l)),
  ]
  return [{ path, words }, ...command.commands.flatMap((c) => walk(c, [...path, c.name()]))]
}

export function completionScript(program: Command, shell: string): string {
  const nodes = walk(program)
  const globals = program.options
    .map((o) => o.long)
    .filter(Boolean)
    .join(' ')
  if (shell === 'bash' || shell === 'zsh') {
    const cases = nodes
      .map((n) => `    "${n.path.join(' ')}") words="${n.words.join(' ')}" ;;`)
      .join('\n')
    const script = `# osctl completion for ${shell}: eval "$(osctl completion ${shell})"
_osctl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" i words=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in -*) ;; *) path="$path \${COMP_WORDS[i]}" ;; esac
  done
  case "\${path# }" in
${cases}
  esac
  COMPREPLY=( $(compgen -W "$words ${globals}" -- "$cur") )
}
complete -F _osctl osctl
`
    return shell === 'zsh' ? `autoload -U +X bashcompinit && bashcompinit\n${script}` : script
  }
  if (shell === 'fish') {
    const lines = nodes.flatMap((n) => {
      const condition = n.path.length
        ? n.path.map((p) => `__fish_seen_subcommand_from ${p}`).join('; and ')
        : '__fish_use_subcommand'
      const subcommands = n.words.filter((w) => !w.startsWith('-'))
      return subcommands.length
        ? [`complete -c osctl -f -n '${condition}' -a '${subcommands.join(' ')}'`]
        : []
    })
    const flags = program.options
      .filter((o) => o.long)
      .map(
        (o) => `complete -c osctl -l ${o.long!.slice(2)} -d '${o.description.replace(/'/g, '')}'`,
      )
    return [
      '# osctl completion for fish: osctl completion fish | source',
      ...lines,
      ...flags,
      '',
    ].join('\n')
  }
  throw new UsageError(`no completion for "${shell}": choose bash, zsh or fish`)
}

export function registerCompletion(program: Command, makeDeps: MakeDeps): void {
  examples(
    program
      .command('completion')
      .description(about.completion)
      .argument('<shell>', 'bash, zsh or fish')
      .action(
        actionOf(makeDeps, async (deps: Deps, shell: string) => {
          deps.out.write(completionScript(program, shell))
        }),
      ),
    'eval "$(osctl completion bash)"',
    'osctl completion fish | source',
  )
}
