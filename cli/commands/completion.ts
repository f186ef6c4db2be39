import type { Command, Option } from 'commander'
import { completionKinds, type CompletionKind } from '../complete.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { about } from './about.js'

interface Node {
  path: string[]
  /** Its subcommands. */
  subcommands: string[]
  /** Its long options. */
  flags: string[]
  /** Those of its options that take a value, long and short: their values are not arguments. */
  valued: string[]
  /** What each of its arguments is, in order: a kind the daemon lists (cli/complete.ts), or `-`. */
  args: string[]
}

/**
 * The kind of value an argument or an option takes, where the daemon can list them (issue 51): task
 * slugs, member names, waiting gates. Read from its name (`<task>`, `<member>`, `<gate>`, `--task`),
 * and `<id>` described as a gate id (`wait gate`).
 */
function kindOf(name: string, description = ''): CompletionKind | undefined {
  const known = completionKinds.find((k) => k === name)
  if (known) return known
  if (name === 'id' && /\bgate id\b/.test(description)) return 'gate'
  return undefined
}

/** Every command path with what may follow it: subcommands, options, arguments. */
function walk(command: Command, path: string[] = []): Node[] {
  const longs = (options: readonly Option[]) =>
    options.map((o) => o.long).filter((l): l is string => Boolean(l))
  const node: Node = {
    path,
    subcommands: command.commands.map((c) => c.name()),
    flags: longs(command.options),
    valued: command.options
      .filter((o) => o.required || o.optional)
      .flatMap((o) => [o.long, o.short])
      .filter((name): name is string => Boolean(name)),
    args: command.registeredArguments.map((a) => kindOf(a.name(), a.description) ?? '-'),
  }
  return [node, ...command.commands.flatMap((c) => walk(c, [...path, c.name()]))]
}

/** The kinds of value of the options that take one, by option, as bash's case patterns. */
function optionKinds(nodes: Node[]): string {
  const options = new Set(nodes.flatMap((n) => n.valued.filter((v) => v.startsWith('--'))))
  return [...options]
    .flatMap((long) => {
      const kind = kindOf(long.slice(2))
      return kind ? [`${long}) kind=${kind} ;;`] : []
    })
    .join(' ')
}

/**
 * The script for bash (and zsh, through bashcompinit). The words typed are walked as commander reads
 * them: subcommands down the tree, an option's value stepped over, anything else an argument. Tab
 * then offers: an option's value (task slugs, member names, waiting gates from the daemon, about a
 * second at most), an argument's (the same), else the subcommands, else the options, after arguments
 * too (issue 51). A value with a space (a member's name) is offered quoted.
 */
function bashScript(program: Command, shell: string): string {
  const nodes = walk(program)
  const globals = walk(program)[0]!
  const cases = nodes
    .map(
      (n) =>
        `    "${n.path.join(' ')}") subs="${n.subcommands.join(' ')}" flags="${n.flags.join(' ')}" ` +
        `valued="${n.valued.join(' ')}" args="${n.args.join(' ')}" ;;`,
    )
    .join('\n')
  return `# osctl completion for ${shell}: eval "$(osctl completion ${shell})"
_osctl_node() {
  subs="" flags="" valued="" args=""
  case "$1" in
${cases}
  esac
}
_osctl_values() {
  local IFS=$'\n' value
  COMPREPLY=()
  for value in $(compgen -W "$(osctl __complete "$1" 2>/dev/null)" -- "$2"); do
    COMPREPLY+=("$(printf '%q' "$value")")
  done
}
_osctl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" path="" i w n=0 kind="" subs flags valued args
  local globals="${globals.flags.join(' ')}" gvalued="${globals.valued.join(' ')}"
  _osctl_node ""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$w" in
      --*=*) ;;
      -*) [[ " $valued $gvalued " == *" $w "* ]] && ((i++)) ;;
      *)
        if ((n == 0)) && [[ " $subs " == *" $w "* ]]; then
          path="\${path:+$path }$w"
          _osctl_node "$path"
        else
          ((n++))
        fi
        ;;
    esac
  done
  ((COMP_CWORD > 1)) && prev="\${COMP_WORDS[COMP_CWORD - 1]}"
  if [[ "$prev" == --* && " $valued $gvalued " == *" $prev "* ]]; then
    case "$prev" in ${optionKinds(nodes)} *) COMPREPLY=(); return ;; esac
    _osctl_values "$kind" "$cur"
    return
  fi
  if [[ "$cur" != -* ]]; then
    if ((n == 0)) && [[ -n "$subs" ]]; then
      COMPREPLY=( $(compgen -W "$subs $flags $globals" -- "$cur") )
      return
    fi
    set -- $args
    ((n < $#)) && kind="\${@:n+1:1}"
    if [[ -n "$kind" && "$kind" != "-" ]]; then
      _osctl_values "$kind" "$cur"
      return
    fi
  fi
  COMPREPLY=( $(compgen -W "$flags $globals" -- "$cur") )
}
complete -F _osctl osctl
`
}

export function completionScript(program: Command, shell: string): string {
  if (shell === 'bash' || shell === 'zsh') {
    const script = bashScript(program, shell)
    return shell === 'zsh' ? `autoload -U +X bashcompinit && bashcompinit\n${script}` : script
  }
  if (shell === 'fish') {
    const nodes = walk(program)
    const lines = nodes.flatMap((n) => {
      const condition = n.path.length
        ? n.path.map((p) => `__fish_seen_subcommand_from ${p}`).join('; and ')
        : '__fish_use_subcommand'
      const kinds = [...new Set(n.args.filter((k) => k !== '-'))]
      return [
        ...(n.subcommands.length
          ? [`complete -c osctl -f -n '${condition}' -a '${n.subcommands.join(' ')}'`]
          : []),
        // Values the daemon lists, for the arguments of the command (fish offers its options too).
        ...kinds.map(
          (kind) => `complete -c osctl -f -n '${condition}' -a '(osctl __complete ${kind})'`,
        ),
        ...(n.path.length
          ? n.flags.map((f) => `complete -c osctl -n '${condition}' -l ${f.slice(2)}`)
          : []),
      ]
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
