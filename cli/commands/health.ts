import type { Command } from 'commander'
import type { Health } from '../../shared/schemas/common.js'
import { decode } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { afterAnswer, exitCodes } from '../errors.js'
import { colour, show } from '../output.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'

/** GET /v1/health; exits 1 when the daemon is degraded. */
export async function health(deps: Deps): Promise<void> {
  const client = deps.client()
  const answer = await client.raw('GET', '/health')
  const body = decode(answer) as Health
  show(deps.out, body, () =>
    deps.out.write(
      `${colour(deps.out, body.status === 'ok' ? 'green' : 'red', body.status)}  osd ${safeText(String(body.version))} at ${client.baseUrl}\n`,
    ),
  )
  if (answer.status !== 200)
    throw afterAnswer(
      `the daemon is ${body.status ?? 'unhealthy'} (${answer.status})`,
      exitCodes.failed,
    )
}

export function registerHealth(program: Command, makeDeps: MakeDeps): void {
  examples(
    program.command('health').description(about.health).action(actionOf(makeDeps, health)),
    'osctl health',
    'OSCTL_URL=http://osd:8080/v1 osctl health --json',
  )
}
