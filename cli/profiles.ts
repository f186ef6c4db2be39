import type Conf from 'conf'

/**
 * conf, once loaded (loadProfileStore). It brings ajv and semver: about 200 ms of a command's start
 * on these machines, a third of `osctl runs list`'s. A command given its URL and token by flags or the
 * environment (a pipeline's OSCTL_URL and OSCTL_TOKEN) never reads a profile, and never loads it
 * (cli/deps.ts loadDeps).
 */
let ConfClass: typeof Conf | undefined

/** Loads the profile store's library; ProfileStore needs it done. */
export async function loadProfileStore(): Promise<void> {
  ConfClass ??= (await import('conf')).default
}

/** Whether the profile store's library is loaded. */
export const profileStoreLoaded = (): boolean => ConfClass !== undefined

export const defaultUrl = 'http://127.0.0.1:8080/v1'

/**
 * What a token of a profile is: an API token, or the session of a person signed in with
 * `osctl auth login --email` (issue 20). Profiles written before sessions existed have no kind: tokens.
 */
export type CredentialKind = 'token' | 'session'

export interface Profile {
  url: string
  token?: string
  kind?: CredentialKind
  /** The person's email, for a session. */
  email?: string
  /**
   * For a session: the profile that was current before the sign-in made this one current, made
   * current again by `osctl auth logout` (issue 27).
   */
  previous?: string
}

/** Session tokens carry this prefix (login answers `osds_...`); API tokens do not. */
export const sessionTokenPrefix = 'osds_'

interface Stored {
  current?: string
  profiles: Record<string, Profile>
  /** The one-time tips osctl has shown on this machine (issue 35: the next step after a sign-in). */
  tipsShown?: string[]
  /** When osctl last warned of each thing it warns of at most once a while (ISO 8601), by name. */
  lastWarned?: Record<string, string>
}

/** Named profiles of URL and token (DESIGN 9), in a file readable by its owner only. */
export class ProfileStore {
  private conf: Conf<Stored>

  constructor(dir = process.env.OSCTL_CONFIG_DIR || undefined) {
    if (!ConfClass)
      throw new Error(
        'osctl read its profiles before loading them (cli/profiles.ts loadProfileStore)',
      )
    this.conf = new ConfClass<Stored>({
      projectName: 'osctl',
      projectSuffix: '',
      cwd: dir,
      configName: 'config',
      configFileMode: 0o600,
      defaults: { profiles: {} },
    })
  }

  get path(): string {
    return this.conf.path
  }

  get current(): string | undefined {
    return this.conf.get('current')
  }

  list(): { name: string; profile: Profile; current: boolean }[] {
    const current = this.current
    return Object.entries(this.conf.get('profiles')).map(([name, profile]) => ({
      name,
      profile,
      current: name === current,
    }))
  }

  get(name: string): Profile | undefined {
    return this.conf.get('profiles')[name]
  }

  save(name: string, profile: Profile, makeCurrent = true): void {
    this.conf.set('profiles', { ...this.conf.get('profiles'), [name]: profile })
    if (makeCurrent || !this.current) this.conf.set('current', name)
  }

  use(name: string): boolean {
    if (!this.get(name)) return false
    this.conf.set('current', name)
    return true
  }

  /** True the first time it is asked about `tip` (recording it), false ever after. */
  firstTime(tip: string): boolean {
    const shown = this.conf.get('tipsShown') ?? []
    if (shown.includes(tip)) return false
    this.conf.set('tipsShown', [...shown, tip])
    return true
  }

  /**
   * True when osctl has not warned of `what` in the last `everyMs` (recording now as the last time),
   * false otherwise: a warning repeated on every command would be noise.
   */
  warningDue(what: string, everyMs: number, now = Date.now()): boolean {
    const warned = this.conf.get('lastWarned') ?? {}
    const last = warned[what] === undefined ? NaN : Date.parse(warned[what])
    if (now - last < everyMs) return false
    this.conf.set('lastWarned', { ...warned, [what]: new Date(now).toISOString() })
    return true
  }

  remove(name: string): boolean {
    const profiles = { ...this.conf.get('profiles') }
    if (!profiles[name]) return false
    delete profiles[name]
    this.conf.set('profiles', profiles)
    if (this.current === name) this.conf.delete('current')
    return true
  }
}

export interface Target {
  url: string
  token: string | undefined
  profile: string
  /** Where the token came from, for `osctl auth status`. */
  tokenSource: 'flag' | 'env' | 'profile' | 'none'
  /** A person's session or an API token (a token of a flag or the environment: by its prefix). */
  kind: CredentialKind
  /** Where the URL came from, in the words of a refusal of it: `--url`, `OSCTL_URL`, `profile "p"`. */
  urlFrom?: string
}

/** Precedence (DESIGN 9): flag > OSCTL_URL / OSCTL_TOKEN / OSCTL_PROFILE > the active profile > default. */
export function resolveTarget(
  flags: { url?: string; token?: string; profile?: string },
  store: Pick<ProfileStore, 'get' | 'current'>,
  env: NodeJS.ProcessEnv = process.env,
): Target {
  const name = flags.profile || env.OSCTL_PROFILE || store.current || 'default'
  const profile = store.get(name)
  const token = flags.token || env.OSCTL_TOKEN || profile?.token
  const fromProfile = !flags.token && !env.OSCTL_TOKEN && Boolean(profile?.token)
  const kind: CredentialKind = fromProfile
    ? (profile?.kind ?? 'token')
    : token?.startsWith(sessionTokenPrefix)
      ? 'session'
      : 'token'
  return {
    kind,
    url: flags.url || env.OSCTL_URL || profile?.url || defaultUrl,
    urlFrom: flags.url
      ? '--url'
      : env.OSCTL_URL
        ? 'OSCTL_URL'
        : profile?.url
          ? `profile "${name}"'s URL`
          : 'the default URL',
    token,
    profile: name,
    tokenSource: flags.token
      ? 'flag'
      : env.OSCTL_TOKEN
        ? 'env'
        : profile?.token
          ? 'profile'
          : 'none',
  }
}
