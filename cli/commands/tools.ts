import { Option, type Command } from 'commander'
import type { z } from 'zod'
import { toolLayers } from '../../shared/values.js'
import type { SignIn, ToolConnection, ToolLayer } from '../../shared/schemas/tools.js'
import {
  actionOf,
  bodyWith,
  confirmDestructive,
  examples,
  withBodyOptions,
  type MakeDeps,
} from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { collect } from '../inputs.js'
import { layerIdOf, layerRefHelp, layerText } from '../layers.js'
import { printFields, printTable, show } from '../output.js'
import { idRef, isUuid, memberId } from '../resolve.js'
import { readSecret } from '../secrets.js'
import { about } from './about.js'

// Tool connections (spec: Endpoints Tools; Authentication 10): a tool server (MCP) with its token, or a
// browser-operated system with its sites and start page, on a team, member, role or task. A token may
// not connect on the enterprise itself, nor set a mustGate list (403 ceo_bind_only). The API never
// answers a tool token, only hasToken; osctl never prints one.
//
// The tool server's address and token are --tool-url and --tool-token: --url and --token are osctl's
// own (the daemon and the API token) and commander reads those anywhere on the line.

type SignInRow = z.infer<typeof SignIn>

const connectionRef = (ref: string) => idRef(ref, 'a tool connection')

const columns = [
  { header: 'NAME', value: (c: ToolConnection) => c.name },
  { header: 'KIND', value: (c: ToolConnection) => c.kind },
  { header: 'LAYER', value: (c: ToolConnection) => c.layer },
  { header: 'LAYER ID', value: (c: ToolConnection) => c.layerId },
  { header: 'TARGET', value: (c: ToolConnection) => c.url ?? c.startPage ?? c.sites },
  { header: 'MUST GATE', value: (c: ToolConnection) => c.mustGate },
  { header: 'ID', value: (c: ToolConnection) => c.id },
]

function showConnection(deps: Deps, connection: ToolConnection): void {
  const browser = connection.kind === 'browser'
  show(deps.out, connection, () =>
    printFields(deps.out, [
      ['name', connection.name],
      ['id', connection.id],
      ['kind', browser ? 'browser-operated system' : 'tool server (MCP)'],
      ['layer', layerText(connection.layer, connection.layerId)],
      ...(browser
        ? ([
            ['sites', connection.sites],
            ['start page', connection.startPage],
          ] as [string, unknown][])
        : ([
            ['url', connection.url],
            ['token', connection.hasToken ? 'kept (never shown)' : 'none'],
          ] as [string, unknown][])),
      ['must gate', connection.mustGate.length ? connection.mustGate : null],
      ['description', connection.description || '-'],
      ['updated', connection.updatedAt],
    ]),
  )
}

export async function listConnections(
  deps: Deps,
  opts: { layer?: ToolLayer; layerId?: string },
): Promise<void> {
  if (opts.layerId !== undefined && opts.layer === undefined)
    throw new UsageError('--layer-id goes with --layer')
  const client = deps.client()
  const layerId =
    opts.layer && opts.layerId !== undefined
      ? await layerIdOf(client, opts.layer, opts.layerId, '--layer-id')
      : undefined
  const connections = await client.get<ToolConnection[]>('/tools/bindings', {
    layer: opts.layer,
    layerId,
  })
  show(deps.out, connections, () => printTable(deps.out, connections, columns))
}

interface ConnectionFlags {
  name?: string
  toolUrl?: string
  toolToken?: string
  tokenStdin?: boolean
  site?: string[]
  startPage?: string
  layer?: ToolLayer
  on?: string
  description?: string
  data?: string
  file?: string
}

/** The body of create and update from -d/-f with the flags laid over it (flags win). */
async function connectionBody(deps: Deps, opts: ConnectionFlags, layerId: string | undefined) {
  const token = await readSecret(
    deps,
    { value: opts.toolToken, stdin: opts.tokenStdin },
    { value: '--tool-token', stdin: '--token-stdin' },
  )
  return bodyWith(deps, opts, {
    name: opts.name,
    url: opts.toolUrl,
    token,
    sites: opts.site,
    startPage: opts.startPage,
    layer: opts.layer,
    layerId,
    description: opts.description,
  })
}

export async function createConnection(deps: Deps, opts: ConnectionFlags): Promise<void> {
  if (opts.tokenStdin && (opts.data === '-' || opts.file === '-'))
    throw new UsageError('stdin can carry the token or the body, not both')
  const client = deps.client()
  const layerId = opts.layer ? await layerIdOf(client, opts.layer, opts.on, '--on') : undefined
  const body = await connectionBody(deps, opts, layerId)
  showConnection(deps, await client.post<ToolConnection>('/tools/bindings', body))
}

export async function updateConnection(
  deps: Deps,
  ref: string,
  opts: ConnectionFlags,
): Promise<void> {
  const id = connectionRef(ref)
  if (opts.tokenStdin && (opts.data === '-' || opts.file === '-'))
    throw new UsageError('stdin can carry the token or the body, not both')
  const client = deps.client()
  // Moving: --layer with --on; --on alone keeps the layer, so it can only be an id there.
  let layerId: string | undefined
  if (opts.layer) layerId = await layerIdOf(client, opts.layer, opts.on, '--on')
  else if (opts.on !== undefined) {
    if (!isUuid(opts.on)) throw new UsageError('--on with a slug or name needs --layer too')
    layerId = opts.on
  }
  const body = await connectionBody(deps, opts, layerId)
  showConnection(deps, await client.patch<ToolConnection>(`/tools/bindings/${id}`, body))
}

export async function deleteConnection(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const id = connectionRef(ref)
  await confirmDestructive(deps, opts.yes, `Remove tool connection ${id}`)
  await deps.client().delete(`/tools/bindings/${id}`)
  show(deps.out, { deleted: id }, () => deps.out.write(`removed tool connection ${id}\n`))
}

export async function listSignIns(deps: Deps, ref: string): Promise<void> {
  const signIns = await deps
    .client()
    .get<SignInRow[]>(`/tools/bindings/${connectionRef(ref)}/sign-ins`)
  show(deps.out, signIns, () =>
    printTable(deps.out, signIns, [
      { header: 'MEMBER', value: (s) => s.memberId },
      { header: 'SITE', value: (s) => s.site },
      { header: 'SAVED', value: (s) => s.savedAt },
    ]),
  )
}

export async function forgetSignIn(
  deps: Deps,
  ref: string,
  member: string,
  opts: { site?: string; yes?: boolean },
): Promise<void> {
  const id = connectionRef(ref)
  const client = deps.client()
  const mid = await memberId(client, member)
  const where = opts.site ? `on ${opts.site}` : 'on every site'
  await confirmDestructive(deps, opts.yes, `Forget the sign-in of ${member} ${where}`)
  await client.delete(`/tools/bindings/${id}/sign-ins/${mid}`, { site: opts.site })
  show(deps.out, { connection: id, member: mid, site: opts.site ?? null, forgotten: true }, () =>
    deps.out.write(`forgot the sign-in of ${member} ${where}\n`),
  )
}

export async function oauthRedirectUri(deps: Deps): Promise<void> {
  const answer = await deps.client().get<{ redirectUri: string }>('/tools/oauth/redirect-uri')
  show(deps.out, answer, () => deps.out.write(`${answer.redirectUri}\n`))
}

export async function startOAuth(
  deps: Deps,
  opts: { connection: string; authorizeUrl: string; clientId: string; scope?: string },
): Promise<void> {
  const body = {
    connectionId: connectionRef(opts.connection),
    authorizeUrl: opts.authorizeUrl,
    clientId: opts.clientId,
    scope: opts.scope,
  }
  const started = await deps
    .client()
    .post<{ url: string; state: string }>('/tools/oauth/start', body)
  show(deps.out, started, () => {
    printFields(deps.out, [
      ['url', started.url],
      ['state', started.state],
    ])
    deps.out.error('open the url in the signed-in browser of the person who started it\n')
  })
}

export function registerTools(program: Command, makeDeps: MakeDeps): void {
  const tools = program.command('tools').description(about.tools)
  const bindings = tools
    .command('bindings')
    .description('tool connections on a team, member, role or task, never their tokens')
  examples(
    bindings
      .command('list')
      .description('every tool connection, or those of one layer')
      .addOption(new Option('--layer <layer>', 'one layer only').choices(toolLayers))
      .option('--layer-id <ref>', 'with --layer: the team, member, role or task')
      .action(actionOf(makeDeps, listConnections)),
    'osctl tools bindings list',
    'osctl tools bindings list --layer team --layer-id platform --json',
  )
  const fields = (command: Command, layerDescription: string) =>
    withBodyOptions(
      command
        .option('--name <namespace>', 'the namespace runs call its tools by (<name>.<tool>)')
        .option('--tool-url <url>', "a tool server's address (MCP over Streamable HTTP)")
        .option('--token-stdin', "read the tool server's token from stdin")
        .option('--tool-token <token>', "the tool server's token (prefer --token-stdin)")
        .option('--site <site>', 'a site of a browser-operated system (repeatable)', collect)
        .option('--start-page <url>', 'where a browser-operated system starts')
        .addOption(new Option('--layer <layer>', layerDescription).choices(toolLayers))
        .option('--on <ref>', layerRefHelp)
        .option('--description <text>'),
    )
  examples(
    fields(
      bindings
        .command('create')
        .description('connect a tool server (--tool-url) or a browser-operated system (--site)'),
      'where it is connected: team, member, role or task',
    ).action(actionOf(makeDeps, createConnection)),
    'printf %s "$VCS_TOKEN" | osctl tools bindings create --name vcs --tool-url https://mcp.example.com/vcs --token-stdin --layer team --on platform',
    'osctl tools bindings create --name crm --site crm.example.com --start-page https://crm.example.com/home --layer role --on sales-rep',
  )
  examples(
    fields(
      bindings
        .command('update')
        .argument('<connection>', 'connection id')
        .description('change a connection, or move it with --layer and --on'),
      'move it to this layer (with --on)',
    ).action(actionOf(makeDeps, updateConnection)),
    'osctl tools bindings update 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --description "GitHub, read and merge"',
    'osctl tools bindings update 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --layer task --on nightly-report',
  )
  examples(
    bindings
      .command('delete')
      .argument('<connection>', 'connection id')
      .option('-y, --yes', 'do not ask')
      .description('remove a tool connection')
      .action(actionOf(makeDeps, deleteConnection)),
    'osctl tools bindings delete 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --yes',
  )
  examples(
    bindings
      .command('sign-ins')
      .argument('<connection>', 'connection id of a browser-operated system')
      .description("the sign-ins members saved on the system's sites")
      .action(actionOf(makeDeps, listSignIns)),
    'osctl tools bindings sign-ins 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    bindings
      .command('forget-sign-in')
      .argument('<connection>', 'connection id of a browser-operated system')
      .argument('<member>', 'id, email or name')
      .option('--site <site>', 'only on this site (default: every site)')
      .option('-y, --yes', 'do not ask')
      .description("forget a member's saved sign-in")
      .action(actionOf(makeDeps, forgetSignIn)),
    'osctl tools bindings forget-sign-in 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 ada@acme.osd.local --site crm.example.com --yes',
  )

  const oauth = tools.command('oauth').description('OAuth sign-in for a tool connection')
  examples(
    oauth
      .command('redirect-uri')
      .description('the redirect address to register with the OAuth provider')
      .action(actionOf(makeDeps, oauthRedirectUri)),
    'osctl tools oauth redirect-uri',
  )
  examples(
    oauth
      .command('start')
      .description(
        'start OAuth; it completes in the signed-in browser of the person who started it',
      )
      .requiredOption('--connection <id>', 'tool connection id')
      .requiredOption('--authorize-url <url>', "the provider's authorization address")
      .requiredOption('--client-id <id>', 'the OAuth client id registered with the provider')
      .option('--scope <scope>', 'scopes to ask for, as the provider spells them')
      .action(actionOf(makeDeps, startOAuth)),
    'osctl tools oauth start --connection 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --authorize-url https://github.com/login/oauth/authorize --client-id Iv1.abc --scope repo',
  )
}
