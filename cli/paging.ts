import { Option, type Command } from 'commander'
import { pageCount, type PageOf, type Query } from './client.js'
import type { Deps } from './deps.js'
import { UsageError } from './errors.js'
import { printTable, show, type Column } from './output.js'

/** The flags of every paged list (DESIGN 9: --page, --limit, --all; spec: Limits for sort/order). */
export interface PageFlags {
  page?: string
  limit?: string
  all?: boolean
  sort?: string
  order?: string
}

/** Adds --page, --limit, --all and, for lists that sort, --sort (the list's fields) and --order. */
export function withPageOptions(command: Command, sorts?: readonly string[]): Command {
  command
    .option('--page <n>', 'page number, from 1')
    .option('--limit <n>', 'page size, 1 to 200 (default 25; with --all, 200)')
    .option('--all', 'follow every page and print them as one list')
  if (sorts) {
    command
      .addOption(new Option('--sort <field>', `sort field (default ${sorts[0]})`).choices(sorts))
      .addOption(
        new Option('--order <order>', 'asc or desc (default desc)').choices(['asc', 'desc']),
      )
  }
  return command
}

/** A whole number of at least 1 from a flag, or undefined when the flag is not given. */
export function positiveInt(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`${flag} takes a whole number of at least 1; got "${value}"`)
  return n
}

/**
 * One page of a paged list (the envelope unchanged with --json), or with --all every page as one
 * array or one table. A note on stderr says when there are more pages. `key` names the records of a
 * list paged in a shape of its own (ApiClient.all).
 */
export async function printPaged<T>(
  deps: Deps,
  path: string,
  filters: Query,
  flags: PageFlags,
  columns: Column<T>[],
  noun: string,
  key = 'data',
): Promise<void> {
  const query: Query = {
    ...filters,
    sort: flags.sort,
    order: flags.order,
    limit: positiveInt('--limit', flags.limit),
  }
  if (flags.all) {
    if (flags.page !== undefined) throw new UsageError('give --page or --all, not both')
    const rows = await deps.client().all<T>(path, query, key)
    show(deps.out, rows, () => printTable(deps.out, rows, columns))
    return
  }
  const page = positiveInt('--page', flags.page)
  const answer = await deps.client().get<PageOf>(path, { ...query, page })
  const pages = pageCount(answer)
  show(deps.out, answer, () => {
    const rows = (answer[key] ?? []) as T[]
    // A page past the last is empty because of the page asked for, not because there is nothing.
    if (rows.length === 0 && answer.page > 1 && answer.page > pages) {
      deps.out.error(
        `page ${answer.page} is past the last: ${answer.total} ${noun} make ${pages} page${pages === 1 ? '' : 's'}${pages > 0 ? ` (--page ${pages} for the last)` : ''}\n`,
      )
      return
    }
    printTable(deps.out, rows, columns)
    if (pages > 1) {
      deps.out.error(
        `page ${answer.page} of ${pages}, ${answer.total} ${noun}: --page N for another, --all for every one\n`,
      )
    }
  })
}
