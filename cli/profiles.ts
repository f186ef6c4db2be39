import Conf from 'conf'

export const defaultUrl = 'http://127.0.0.1:8080/v1'

export interface Profile {
  url: string
  token?: string
}

interface Stored {
  current?: string
  profiles: Record<string, Profile>
}

/** Named profiles of URL and token (DESIGN 9), in a file readable by its owner only. */
export class ProfileStore {
  private conf: Conf<Stored>

  constructor(dir = process.env.OSCTL_CONFIG_DIR || undefined) {
    this.conf = new Conf<Stored>({
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
  return {
    url: flags.url || env.OSCTL_URL || profile?.url || defaultUrl,
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
