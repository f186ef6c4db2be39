import type { Command } from 'commander'
import { apiError, decode } from '../client.js'
import { actionOf, examples, readBody, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError, noTokenError } from '../errors.js'
import { parseInputs } from '../inputs.js'
import { about } from './about.js'

const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']

/** Any route, as `gh api` does: the answer body on stdout, exit 1 on an error status. */
export async function callApi(
  deps: Deps,
  method: string,
  path: string,
  opts: { data?: string; file?: string; field?: string[] },
): Promise<void> {
  const verb = method.toUpperCase()
  if (!methods.includes(verb)) throw new UsageError(`METHOD must be one of ${methods.join(', ')}`)
  let body = await readBody(deps, opts)
  if (opts.field?.length) {
    body = { ...(body as object), ...parseInputs(opts.field, '-F') }
  }
  const client = deps.client()
  const publicRoute = /^\/?(v1\/)?(health(\/live|\/ready)?|openapi\.json)$/.test(path)
  if (!deps.target().token && !publicRoute) {
    throw noTokenError()
  }
  const answer = await client.raw(verb, path, { body })
  const parsed = decode(answer)
  if (answer.body.length) {
    deps.out.write(typeof parsed === 'string' ? parsed : JSON.stringify(parsed, null, 2) + '\n')
  }
  // With --json, the error body printed above is the one document on stdout (report() adds none).
  if (answer.status >= 400)
    throw Object.assign(apiError(answer.status, parsed, client.baseUrl), {
      printed: answer.body.length > 0,
    })
}

export function registerApi(program: Command, makeDeps: MakeDeps): void {
  examples(
    program
      .command('api')
      .description(about.api)
      .argument('<method>', methods.join('|'))
      .argument('<path>', 'path under /v1, e.g. /tasks or /v1/tasks')
      .option('-d, --data <json>', 'request body as JSON ("-" reads stdin)')
      .option('-f, --file <file>', 'request body from a JSON file ("-" reads stdin)')
      .option('-F, --field <key=value...>', 'body field; the value is read as JSON when it parses')
      .action(actionOf(makeDeps, callApi)),
    'osctl api GET /enterprise/concurrency',
    `osctl api PATCH /enterprise/concurrency -d '{"concurrentRunLimit": 4}'`,
    'osctl api POST /enterprise/webhook-secret/rotate',
  )
}
