import { readFileSync } from 'node:fs'
import type postgres from 'postgres'

// DATABASE_URL as libpq reads it (docs/configuration.md), for postgres.js. postgres.js reads the URL's
// users, hosts (several, for a primary and its standbys), database, sslmode, target_session_attrs and
// connect_timeout as libpq does, and sends every other parameter to the server as a setting of the
// connection (`?search_path=osd`, `?statement_timeout=5000`). What it does not read as libpq does is
// read here:
//
// - a Unix socket: a directory as the host, percent-encoded (`postgresql://%2Fvar%2Frun%2Fpostgresql/osd`)
//   or as the `host` parameter (`postgresql:///osd?host=/cloudsql/project:region:db`), as Cloud SQL's
//   and most Unix installs' URLs name it. postgres.js looked the encoded name up in DNS, and sent
//   `host` to the server, which refused it ("unrecognized configuration parameter");
// - the `port`, `user`, `password` and `dbname` parameters;
// - `sslrootcert`, `sslcert`, `sslkey` and `sslpassword`: the files are read here, once, and the
//   server's certificate is verified against the CA given (a managed database's CA bundle). As libpq
//   does, `sslmode=require` with a root certificate verifies the chain (verify-ca);
// - libpq's other client parameters (keepalives, service files, Kerberos...), which no server takes as
//   a setting: refused here, naming the parameter, rather than by the server at every connection.

/** A DATABASE_URL osd cannot use; the message names what is wrong in it (never its password). */
export class DatabaseUrlError extends Error {}

export interface Connection {
  /** The URL for postgres.js, without what `options` carries. */
  url: string
  options: Pick<
    postgres.Options<Record<string, never>>,
    'host' | 'port' | 'path' | 'user' | 'pass' | 'database' | 'ssl'
  >
}

/** libpq's parameters of the client side that osd does not implement. */
const unsupported = [
  'hostaddr',
  'passfile',
  'require_auth',
  'channel_binding',
  'service',
  'gssencmode',
  'gsslib',
  'gssdelegation',
  'krbsrvname',
  'requirepeer',
  'sslcrl',
  'sslcrldir',
  'sslsni',
  'sslcompression',
  'sslkeylogfile',
  'ssl_min_protocol_version',
  'ssl_max_protocol_version',
  'min_protocol_version',
  'max_protocol_version',
  'keepalives',
  'keepalives_idle',
  'keepalives_interval',
  'keepalives_count',
  'tcp_user_timeout',
  'load_balance_hosts',
  'replication',
  'fallback_application_name',
]

const sslModes = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full']

/** Reads `url` as libpq would; throws DatabaseUrlError saying what is wrong. */
export function connectionOf(url: string): Connection {
  const scheme = /^(postgres|postgresql):\/\//i.exec(url)
  if (!scheme)
    throw new DatabaseUrlError(
      'DATABASE_URL must be a postgres:// or postgresql:// URL (postgres://user:password@host:5432/database)',
    )
  // The authority as written: postgres.js reads a list of hosts there, which URL does not.
  const rest = url.slice(scheme[0].length)
  const end = rest.search(/[/?#]/)
  const authority = end < 0 ? rest : rest.slice(0, end)
  const tail = end < 0 ? '' : rest.slice(end)
  const userinfo = authority.slice(0, authority.lastIndexOf('@') + 1)
  const hosts = authority.slice(userinfo.length)
  const [, firstHost = '', firstPort] = /^(.*?)(?::(\d+))?$/.exec(hosts.split(',')[0]!)!
  const encodedSocket = hosts !== '' && !hosts.includes(',') && decoded(firstHost).startsWith('/')
  let parsed: URL
  try {
    // One host of the list, so that URL reads the rest (the others are postgres.js's to read).
    const host = encodedSocket || firstHost === '' ? 'localhost' : firstHost
    parsed = new URL(`postgres://${userinfo}${host}${firstPort ? `:${firstPort}` : ''}${tail}`)
  } catch {
    throw new DatabaseUrlError(
      'DATABASE_URL is not a valid URL (a password with @, /, : or # in it is written percent-encoded: %40, %2F, %3A, %23)',
    )
  }
  const params = parsed.searchParams
  for (const name of params.keys())
    if (unsupported.includes(name))
      throw new DatabaseUrlError(
        `DATABASE_URL's parameter ${name} is one of libpq's that osd does not support: remove it`,
      )
  const options: Connection['options'] = {}
  const take = (name: string) => {
    const value = params.get(name) ?? undefined
    params.delete(name)
    return value
  }

  const hostParam = take('host')
  if (hostParam?.includes(','))
    throw new DatabaseUrlError(
      'DATABASE_URL names several hosts in its host parameter: write them in the URL (postgres://db1:5432,db2:5432/osd)',
    )
  const port = take('port') ?? (hostParam !== undefined || encodedSocket ? firstPort : undefined)
  if (port !== undefined && !/^\d{1,5}$/.test(port))
    throw new DatabaseUrlError(`DATABASE_URL's port must be a number; got "${port}"`)
  // No host at all: PGHOST, as libpq and postgres.js read it (a socket directory too), else localhost.
  const host =
    hostParam ??
    (encodedSocket ? decoded(firstHost) : hosts === '' ? process.env.PGHOST : undefined)
  if (host !== undefined) {
    options.host = host
    // A directory: the server's socket in it, named by the port as PostgreSQL names it.
    if (host.startsWith('/'))
      options.path = `${host.replace(/\/+$/, '')}/.s.PGSQL.${port ?? process.env.PGPORT ?? 5432}`
  }
  if (port !== undefined) options.port = Number(port)
  const user = take('user')
  if (user !== undefined) options.user = user
  const password = take('password')
  if (password !== undefined) options.pass = password
  const dbname = take('dbname')
  if (dbname !== undefined) options.database = dbname

  const mode = params.get('sslmode') ?? undefined
  if (mode !== undefined && !sslModes.includes(mode))
    throw new DatabaseUrlError(
      `DATABASE_URL's sslmode must be one of ${sslModes.join(', ')}; got "${mode}"`,
    )
  // sslrootcert=system (the machine's CAs, verify-full) alone is postgres.js's own.
  const rootcert = params.get('sslrootcert') ?? undefined
  const files = {
    ca: rootcert === 'system' ? undefined : fileOf('sslrootcert', rootcert),
    cert: fileOf('sslcert', take('sslcert')),
    key: fileOf('sslkey', take('sslkey')),
  }
  const passphrase = take('sslpassword')
  if (files.ca || files.cert || files.key || passphrase !== undefined) {
    if (mode === 'disable')
      throw new DatabaseUrlError(
        'DATABASE_URL gives TLS files with sslmode=disable: remove them, or choose an sslmode that uses TLS',
      )
    params.delete('sslmode')
    params.delete('sslrootcert')
    // libpq: verify-ca and verify-full verify the server's certificate, and so does require (or no
    // sslmode) when a root certificate is given; allow and prefer never do.
    const verify =
      mode === 'verify-ca' ||
      mode === 'verify-full' ||
      rootcert === 'system' ||
      (files.ca !== undefined && mode !== 'allow' && mode !== 'prefer')
    options.ssl = {
      ...(files.ca && { ca: files.ca }),
      ...(files.cert && { cert: files.cert }),
      ...(files.key && { key: files.key }),
      ...(passphrase !== undefined && { passphrase }),
      rejectUnauthorized: verify,
      // verify-full also checks that the certificate names the host; verify-ca the chain only.
      ...(mode !== 'verify-full' &&
        rootcert !== 'system' && { checkServerIdentity: () => undefined }),
    }
  }
  // The hosts as written (a list is postgres.js's to read), or, for a socket or none, a name that
  // options.host stands in for (URL refuses a user with no host).
  const query = params.toString()
  const path = tail.replace(/[?#].*$/, '')
  return {
    url: `${scheme[0]}${userinfo}${encodedSocket || hosts === '' ? 'localhost' : hosts}${path}${query ? `?${query}` : ''}`,
    options,
  }
}

/** A host as written, percent-decoded (`%2Fvar%2Frun%2Fpostgresql` is a socket directory). */
function decoded(host: string): string {
  try {
    return decodeURIComponent(host)
  } catch {
    return host
  }
}

function fileOf(name: string, path: string | undefined): Buffer | undefined {
  if (path === undefined) return undefined
  try {
    return readFileSync(path)
  } catch (err) {
    throw new DatabaseUrlError(
      `DATABASE_URL's ${name} ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    )
  }
}
