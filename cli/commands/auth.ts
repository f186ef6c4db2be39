import type { Command } from 'commander'
import type { EnterpriseOverview } from '../../shared/schemas/enterprise.js'
import { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { ApiRequestError, AuthError, UsageError } from '../errors.js'
import { printFields, show } from '../output.js'

/**
 * Saves the global --url and --token as a profile (--profile, default "default") and makes it current,
 * after checking that the daemon takes the token.
 */
export async function login(deps: Deps, opts: { verify: boolean }): Promise<void> {
  const url = deps.globals.url ?? process.env.OSCTL_URL
  const token = deps.globals.token ?? process.env.OSCTL_TOKEN
  if (!url) throw new UsageError('--url is required (or OSCTL_URL)')
  if (!token) throw new UsageError('--token is required (or OSCTL_TOKEN)')
  const name = deps.globals.profile ?? 'default'
  let seen: TokenView | undefined
  if (opts.verify) seen = await whoAmI(new ApiClient(url, token))
  deps.profiles().save(name, { url, token })
  show(deps.out, { profile: name, url, ...seen }, () => {
    deps.out.write(`logged in to ${url} as profile "${name}"`)
    deps.out.write(seen?.enterprise ? ` (enterprise ${seen.enterprise.slug})\n` : '\n')
  })
}

interface TokenView {
  enterprise?: EnterpriseOverview['enterprise']
  scopes: string[]
}

/**
 * The token's enterprise and scopes as the daemon sees them. A token without enterprise:read is still a
 * valid token: the refusal names the scopes it holds.
 */
async function whoAmI(client: ApiClient): Promise<TokenView> {
  try {
    const overview = await client.get<EnterpriseOverview>('/enterprise')
    return { enterprise: overview.enterprise, scopes: overview.token?.scopes ?? [] }
  } catch (err) {
    if (err instanceof ApiRequestError && err.status === 401) {
      throw new AuthError(`${client.baseUrl} refused the token (401): it is wrong or revoked`)
    }
    if (err instanceof ApiRequestError && err.code === 'api_token_scope') {
      return { scopes: ((err.body as { held?: string[] }).held ?? []).slice() }
    }
    throw err
  }
}

export async function status(deps: Deps): Promise<void> {
  const target = deps.target()
  if (!target.token) {
    throw new AuthError(
      `no token configured for profile "${target.profile}": run \`osctl auth login --url URL --token TOKEN\``,
    )
  }
  const seen = await whoAmI(deps.client())
  const view = {
    url: target.url,
    profile: target.profile,
    tokenSource: target.tokenSource,
    tokenLastChars: target.token.slice(-4),
    enterprise: seen.enterprise ?? null,
    scopes: seen.scopes,
  }
  show(deps.out, view, () =>
    printFields(deps.out, [
      ['url', view.url],
      ['profile', view.profile],
      ['token', `…${view.tokenLastChars} (from ${view.tokenSource})`],
      [
        'enterprise',
        seen.enterprise
          ? `${seen.enterprise.slug} (${seen.enterprise.id})`
          : '(needs enterprise:read)',
      ],
      ['scopes', view.scopes.join(' ')],
    ]),
  )
}

export async function logout(deps: Deps): Promise<void> {
  const name = deps.target().profile
  const profile = deps.profiles().get(name)
  if (!profile) throw new UsageError(`no profile "${name}"`)
  deps.profiles().save(name, { url: profile.url }, false)
  show(deps.out, { profile: name }, () =>
    deps.out.write(`removed the token of profile "${name}"\n`),
  )
}

export function registerAuth(program: Command, makeDeps: MakeDeps): void {
  const auth = program.command('auth').description('sign in with an API token and see who you are')
  examples(
    auth
      .command('login')
      .description(
        'save --url and --token as a profile (--profile, default "default") and make it current',
      )
      .option('--no-verify', 'save without asking the daemon')
      .action(actionOf(makeDeps, login)),
    'osctl auth login --url http://127.0.0.1:8080/v1 --token osd_xxx',
    'osctl auth login --profile prod --url https://osd.example.com/v1 --token "$OSD_TOKEN"',
  )
  examples(
    auth
      .command('status')
      .description("show the URL, profile, token's last characters and its scopes")
      .action(actionOf(makeDeps, status)),
    'osctl auth status',
    'osctl --profile prod auth status --json',
  )
  examples(
    auth
      .command('logout')
      .description('forget the token of the current profile')
      .action(actionOf(makeDeps, logout)),
    'osctl auth logout',
  )
}
