import { ApiClient, type RawAnswer, type RequestOptions } from '../../cli/client.js'
import type { Deps } from '../../cli/deps.js'
import { makeOutput } from '../../cli/output.js'
import type { ProfileStore, Target } from '../../cli/profiles.js'

// osctl actions in process (STYLE: CLI actions are tested in process): a client whose transport is the
// test, recording every request and answering what the test says, and deps with captured output.

export interface Sent {
  method: string
  path: string
  query: Record<string, string>
  body: unknown
  /** Headers a verb set itself, when it set any. */
  headers?: Record<string, string>
}

export type Answer = { status?: number; body?: unknown }

/** An ApiClient whose transport is the test: every request recorded, each answered by `answer`. */
export class FakeApi extends ApiClient {
  readonly sent: Sent[] = []
  constructor(private readonly answer: (req: Sent) => Answer) {
    super('http://osd.test/v1', 'test-token')
  }
  override async raw(method: string, path: string, options: RequestOptions = {}) {
    const url = new URL(this.url(path, options.query))
    const req: Sent = {
      method,
      path: url.pathname.replace(/^\/v1/, ''),
      query: Object.fromEntries(url.searchParams),
      body: options.body,
      ...(options.headers ? { headers: options.headers } : {}),
    }
    this.sent.push(req)
    const { status = 200, body } = this.answer(req)
    const answer: RawAnswer = {
      status,
      contentType: body === undefined ? '' : 'application/json',
      body: Buffer.from(body === undefined ? '' : JSON.stringify(body)),
    }
    return answer
  }
}

export function fakeDeps(
  api: FakeApi,
  opts: {
    json?: boolean
    confirm?: boolean
    stdin?: string
    color?: boolean
    /** stdout is a terminal (without colour); `color` implies it. */
    tty?: boolean
    /** stderr is a terminal: the spinner and fitted event lines there (issue 51). */
    errorTty?: boolean
    /** The terminal's width (default 100). */
    columns?: number
    /** What is typed at a password prompt; undefined: no terminal to ask on. */
    password?: string
    /** The target's credential (default: an API token from the environment). */
    target?: Partial<Target>
    /** A profile store of the test's own (a temporary directory); none by default. */
    profiles?: ProfileStore
  } = {},
): {
  deps: Deps
  stdout: () => string
  stderr: () => string
  /** The daemons and credentials `deps.connect` was asked for, in order. */
  connected: { url: string; token: string | undefined }[]
  /** Ctrl+C pressed: calls what listens for it through `deps.onInterrupt`. */
  interrupt: () => void
  /** How many listen for Ctrl+C now. */
  interruptListeners: () => number
} {
  const connected: { url: string; token: string | undefined }[] = []
  const interruptListeners = new Set<() => void>()
  let stdout = ''
  let stderr = ''
  const out = makeOutput(
    {
      json: Boolean(opts.json),
      isTTY: Boolean(opts.color || opts.tty),
      errorIsTTY: Boolean(opts.errorTty),
      color: Boolean(opts.color),
      columns: opts.columns ?? 100,
    },
    (text) => void (stdout += text),
    (text) => void (stderr += text),
  )
  const target: Target = {
    url: api.baseUrl,
    token: 'test-token',
    profile: 'test',
    tokenSource: 'env',
    kind: 'token',
    ...opts.target,
  }
  const deps: Deps = {
    out,
    globals: { json: opts.json },
    target: () => target,
    client: () => api,
    connect: (url, token) => {
      connected.push({ url, token })
      return api
    },
    profiles: () => {
      if (!opts.profiles) throw new Error('no profiles in this test')
      return opts.profiles
    },
    confirm: async () => opts.confirm,
    password: async () => opts.password,
    stdin: async () => opts.stdin ?? '',
    onInterrupt: (listener) => {
      const own = () => listener()
      interruptListeners.add(own)
      return () => void interruptListeners.delete(own)
    },
  }
  return {
    deps,
    stdout: () => stdout,
    stderr: () => stderr,
    connected,
    interrupt: () => [...interruptListeners].forEach((l) => l()),
    interruptListeners: () => interruptListeners.size,
  }
}
