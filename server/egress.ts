import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import type { Agent } from 'undici'
import { ApiError } from '../shared/errors.js'

// Where osd may connect on a tenant's behalf (DESIGN 15; OWASP API7, server-side request forgery).
// Every address a tenant gives osd (a tool server's url, a browser system's sites, and any later one)
// obeys this one rule: http or https, and no host that is or resolves to a loopback, link-local,
// private, unspecified, multicast or reserved address, or a cloud metadata name, unless the operator
// allows it in OSD_EGRESS_ALLOW. It is checked when the address is saved (checkUrl, requireAllowedUrl)
// and again when osd connects (egressFetch), against each address the connection is about to use,
// redirects included: a name's answer can change between the two. Model providers' base URLs are the
// operator's configuration, not a tenant's, and do not go through here.
//
// A leaf: node, undici and the shared error type only, so any layer may use it.

/** One address of a name, as node:dns's lookup answers with `all: true`. */
export type ResolvedAddress = LookupAddress

/** Resolves a name to all of its addresses: node:dns lookup unless a test gives its own. */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>

interface Network {
  family: 4 | 6
  bits: bigint
  prefix: number
}

/** OSD_EGRESS_ALLOW, parsed: networks and host names that may be reached although private. */
export interface EgressAllow {
  networks: Network[]
  /** Exact names, lower case, without a trailing dot. */
  names: string[]
  /** Names whose subdomains are allowed (`*.corp.example` or `.corp.example`), without the dot. */
  suffixes: string[]
}

/** The egress rule of a process: what OSD_EGRESS_ALLOW allows and how names are resolved. */
export interface EgressRule {
  allow: EgressAllow
  /** Tests give a resolver of their own, so a name's answer can change under them; none in production. */
  resolve?: Resolve
}

/** A connection osd refused to make; its message says why and how to allow it. */
export class EgressRefused extends Error {
  readonly code = 'EGRESS_REFUSED'
  constructor(message: string) {
    super(message)
    this.name = 'EgressRefused'
  }
}

export class EgressConfigError extends Error {}

/** No allowance at all: every private address and metadata name refused. */
export const strictEgress: EgressRule = { allow: { networks: [], names: [], suffixes: [] } }

/**
 * Parses OSD_EGRESS_ALLOW: comma-separated CIDRs (`10.1.0.0/16`, `fd00::/8`), single addresses
 * (`::1`) and host names (`tools.corp.example`, or `*.corp.example` for its subdomains).
 */
export function parseEgressAllow(raw: string | undefined): EgressAllow {
  const allow: EgressAllow = { networks: [], names: [], suffixes: [] }
  for (const entry of (raw ?? '').split(',')) {
    const item = entry.trim().toLowerCase()
    if (!item) continue
    const [address, prefixText, extra] = item.replace(/^\[|\](?=\/|$)/g, '').split('/')
    const family = isIP(address!)
    if (family) {
      const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText)
      const max = family === 4 ? 32 : 128
      if (extra !== undefined || !/^\d+$/.test(prefixText ?? '0') || prefix > max)
        throw new EgressConfigError(
          `OSD_EGRESS_ALLOW: "${entry.trim()}" is not a network (an address, or an address/prefix of at most ${max})`,
        )
      allow.networks.push(network(address!, family as 4 | 6, prefix))
      continue
    }
    const name = item.replace(/\.$/, '')
    const wildcard = /^\*?\./.test(name)
    const bare = name.replace(/^\*?\./, '')
    if (
      /^[\d.]+$/.test(bare) ||
      !/^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/.test(bare)
    )
      throw new EgressConfigError(
        `OSD_EGRESS_ALLOW: "${entry.trim()}" is neither a network (CIDR) nor a host name`,
      )
    ;(wildcard ? allow.suffixes : allow.names).push(bare)
  }
  return allow
}

// --- addresses ----------------------------------------------------------------------------------

/** An address as a number of its family's width. */
function bitsOf(address: string, family: 4 | 6): bigint {
  if (family === 4)
    return address.split('.').reduce((value, part) => (value << 8n) | BigInt(Number(part)), 0n)
  let text = address.toLowerCase().replace(/%.*$/, '')
  // A dotted IPv4 tail (::ffff:127.0.0.1) is two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const v4 = bitsOf(dotted[1]!, 4)
    text = `${text.slice(0, -dotted[1]!.length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined]
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
  return groups.reduce((value, group) => (value << 16n) | BigInt(parseInt(group || '0', 16)), 0n)
}

function network(address: string, family: 4 | 6, prefix: number): Network {
  const width = family === 4 ? 32 : 128
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(width - prefix)
  return { family, bits: bitsOf(address, family) & mask, prefix }
}

function inNetwork(bits: bigint, family: 4 | 6, net: Network): boolean {
  if (net.family !== family) return false
  const width = family === 4 ? 32 : 128
  const shift = BigInt(width - net.prefix)
  return net.prefix === 0 || bits >> shift === net.bits >> shift
}

const v4 = (cidr: string) => {
  const [address, prefix] = cidr.split('/')
  return network(address!, 4, Number(prefix))
}
const v6 = (cidr: string) => {
  const [address, prefix] = cidr.split('/')
  return network(address!, 6, Number(prefix))
}

/** What osd does not reach unless allowed, each with the words the refusal uses. */
const refusedV4: [Network, string][] = [
  [v4('169.254.169.254/32'), 'a link-local address (the cloud metadata service)'],
  [v4('0.0.0.0/8'), 'an unspecified address'],
  [v4('127.0.0.0/8'), 'a loopback address'],
  [v4('10.0.0.0/8'), 'a private address'],
  [v4('172.16.0.0/12'), 'a private address'],
  [v4('192.168.0.0/16'), 'a private address'],
  [v4('100.64.0.0/10'), 'a private address (shared address space)'],
  [v4('169.254.0.0/16'), 'a link-local address'],
  [v4('192.0.0.0/24'), 'a reserved address'],
  [v4('198.18.0.0/15'), 'a reserved address'],
  [v4('224.0.0.0/4'), 'a multicast address'],
  [v4('240.0.0.0/4'), 'a reserved address'],
]
const refusedV6: [Network, string][] = [
  [v6('fd00:ec2::254/128'), 'a link-local address (the cloud metadata service)'],
  [v6('::/128'), 'an unspecified address'],
  [v6('::1/128'), 'a loopback address'],
  [v6('fe80::/10'), 'a link-local address'],
  [v6('fec0::/10'), 'a private address (site-local)'],
  [v6('fc00::/7'), 'a private address'],
  [v6('ff00::/8'), 'a multicast address'],
  [v6('100::/64'), 'a reserved address'],
  [v6('2001:db8::/32'), 'a reserved address'],
]

/** IPv6 forms that carry an IPv4 address osd would reach: mapped, compatible, NAT64, 6to4. */
function embeddedV4(bits: bigint): bigint | undefined {
  const high96 = bits >> 32n
  if (high96 === 0xffffn || (high96 === 0n && bits > 1n)) return bits & 0xffffffffn
  if (bits >> 32n === 0x64ff9b0000000000000000n) return bits & 0xffffffffn
  if (bits >> 112n === 0x2002n) return (bits >> 80n) & 0xffffffffn
  return undefined
}

function v4Text(bits: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => Number((bits >> shift) & 0xffn)).join('.')
}

function allowedAddress(bits: bigint, family: 4 | 6, allow: EgressAllow): boolean {
  if (allow.networks.some((net) => inNetwork(bits, family, net))) return true
  const inner = family === 6 ? embeddedV4(bits) : undefined
  return inner !== undefined && allow.networks.some((net) => inNetwork(inner, 4, net))
}

/** Why osd may not reach this address, or undefined when it may. */
export function addressRefusal(address: string, rule: EgressRule): string | undefined {
  const bare = address.replace(/^\[|\]$/g, '')
  const family = isIP(bare) as 0 | 4 | 6
  if (!family) return `${address} is not an address`
  const bits = bitsOf(bare, family)
  if (allowedAddress(bits, family, rule.allow)) return undefined
  if (family === 4) {
    const hit = refusedV4.find(([net]) => inNetwork(bits, 4, net))
    return hit && `${bare} is ${hit[1]}`
  }
  const hit = refusedV6.find(([net]) => inNetwork(bits, 6, net))
  if (hit) return `${bare} is ${hit[1]}`
  const inner = embeddedV4(bits)
  if (inner === undefined) return undefined
  const within = refusedV4.find(([net]) => inNetwork(inner, 4, net))
  return within && `${bare} is ${within[1]} (${v4Text(inner)} written as IPv6)`
}

// --- names --------------------------------------------------------------------------------------

/** Names of cloud metadata services, refused whatever they resolve to (they may resolve anywhere). */
const metadataNames = new Set([
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'metadata.azure.com',
  'metadata.packet.net',
  'instance-data',
  'instance-data.ec2.internal',
  'metadata.tencentyun.com',
  'metadata.platformequinix.com',
])

function normalName(hostname: string): string {
  return hostname.toLowerCase().replace(/\.$/, '')
}

function allowedName(name: string, allow: EgressAllow): boolean {
  return allow.names.includes(name) || allow.suffixes.some((suffix) => name.endsWith(`.${suffix}`))
}

const systemResolve: Resolve = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses),
    ),
  )

const howToAllow = 'set OSD_EGRESS_ALLOW to allow it'

/**
 * The addresses osd may connect to for this host: every address the name resolves to, once none of
 * them is refused. Throws EgressRefused with the reason, or the resolver's own error (ENOTFOUND).
 */
export async function resolveAllowed(
  hostname: string,
  rule: EgressRule,
): Promise<ResolvedAddress[]> {
  const bare = hostname.replace(/^\[|\]$/g, '')
  const family = isIP(bare)
  if (family) {
    const refused = addressRefusal(bare, rule)
    if (refused) throw new EgressRefused(`${refused}; ${howToAllow}`)
    return [{ address: bare, family }]
  }
  const name = normalName(bare)
  const byName = allowedName(name, rule.allow)
  if (!byName && metadataNames.has(name))
    throw new EgressRefused(`${name} is a cloud metadata name; ${howToAllow}`)
  const addresses = await (rule.resolve ?? systemResolve)(name)
  if (addresses.length === 0)
    throw Object.assign(new Error(`${name} has no address`), { code: 'ENOTFOUND' })
  if (!byName)
    for (const { address } of addresses) {
      const refused = addressRefusal(address, rule)
      if (refused)
        throw new EgressRefused(
          `${name} resolves to ${refused.replace(/^\S+ is /, `${address}, `)}; ${howToAllow}`,
        )
    }
  return addresses
}

// --- the check on save --------------------------------------------------------------------------

/**
 * Why osd may not connect to this address on a tenant's behalf, or undefined when it may. A name that
 * does not resolve now is let through: it is checked again at connect time, when it must resolve.
 */
export async function checkUrl(url: string | URL, rule: EgressRule): Promise<string | undefined> {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return `${String(url)} is not an address`
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return `${parsed.protocol} addresses are not allowed: osd connects to http and https only`
  try {
    await resolveAllowed(parsed.hostname, rule)
    return undefined
  } catch (err) {
    if (err instanceof EgressRefused) return err.message
    return undefined
  }
}

/**
 * A site as a browser connection names it: an address, or a bare host (and port) taken as https.
 */
export function siteUrl(site: string): string {
  const trimmed = site.trim()
  return /^[a-z][a-z0-9+.-]*:/i.test(trimmed) && trimmed.includes('://')
    ? trimmed
    : `https://${trimmed}`
}

/** Throws 400 url_not_allowed, naming the field and why, when osd may not connect to `url`. */
export async function requireAllowedUrl(
  field: string,
  url: string,
  rule: EgressRule,
): Promise<void> {
  const refused = await checkUrl(url, rule)
  if (refused)
    throw new ApiError('url_not_allowed', `${field}: ${url} is not allowed: ${refused}.`, {
      field,
    })
}

// --- the check at connect time ------------------------------------------------------------------

/** A lookup for net.connect that answers only addresses the rule allows. */
function checkedLookup(rule: EgressRule): LookupFunction {
  return (hostname, options, callback) => {
    resolveAllowed(hostname, rule).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? options.family : undefined
        const usable = wanted ? addresses.filter((a) => a.family === wanted) : addresses
        if (usable.length === 0)
          return callback(
            Object.assign(new Error(`${hostname} has no IPv${wanted} address`), {
              code: 'ENOTFOUND',
            }),
            '',
            0,
          )
        if (options.all) (callback as (e: null, a: LookupAddress[]) => void)(null, usable)
        else callback(null, usable[0]!.address, usable[0]!.family)
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    )
  }
}

const agents = new WeakMap<EgressRule, Agent>()

/**
 * The dispatcher of a rule: every connection it opens is checked against the address it uses. An
 * address in the URL is checked here (net.connect does not look one up); a name is checked in its
 * lookup, each of its addresses, at every new connection (so a redirect's too). undici is loaded by
 * the first connection, not with the configuration (osd admin never needs it).
 */
export async function egressAgent(rule: EgressRule): Promise<Agent> {
  const { Agent, buildConnector } = await import('./undici.js')
  let agent = agents.get(rule)
  if (!agent) {
    const connect = buildConnector({ lookup: checkedLookup(rule) })
    agent = new Agent({
      connect(options, callback) {
        const host = options.hostname.replace(/^\[|\]$/g, '')
        if (isIP(host)) {
          const refused = addressRefusal(host, rule)
          if (refused) return callback(new EgressRefused(`${refused}; ${howToAllow}`), null)
        }
        connect(options, callback)
      },
    })
    agents.set(rule, agent)
  }
  return agent
}

/** The fetch of a WHATWG-style client (the MCP SDK's FetchLike). */
export type Fetch = (url: string | URL, init?: RequestInit) => Promise<Response>

/**
 * A fetch that connects only where the rule allows, redirects included: undici follows them (http and
 * https only, dropping Authorization on another origin) through the same checked dispatcher.
 */
export function egressFetch(rule: EgressRule): Fetch {
  return async (url, init) => {
    const target = new URL(url)
    if (target.protocol !== 'http:' && target.protocol !== 'https:')
      throw new EgressRefused(
        `${target.protocol} addresses are not allowed: osd connects to http and https only`,
      )
    const dispatcher = await egressAgent(rule)
    const { fetch } = await import('./undici.js')
    // undici's fetch takes the web platform's RequestInit and answers a Response of the same shape.
    const response = await fetch(target, {
      ...(init as Parameters<typeof fetch>[1]),
      dispatcher,
    })
    return response as unknown as Response
  }
}

/** The refusal behind a failed connection (undici wraps it as fetch failed's cause), if it was one. */
export function egressRefusalOf(err: unknown): EgressRefused | undefined {
  for (let at: unknown = err, depth = 0; at && depth < 5; depth++) {
    if (at instanceof EgressRefused) return at
    at = (at as { cause?: unknown }).cause
  }
  return undefined
}

/**
 * The first `max` bytes of an outside answer's body, as text; the rest is not read: breaking off the
 * iteration cancels a web body and destroys a node one, so a server that sends without end costs osd
 * `max` bytes and no more. A body that fails part way answers what came before.
 */
export async function firstBytes(
  body: AsyncIterable<Uint8Array> | null | undefined,
  max: number,
): Promise<string> {
  if (!body) return ''
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for await (const chunk of body) {
      chunks.push(chunk)
      size += chunk.byteLength
      if (size >= max) break
    }
  } catch {
    // what came before the failure is the answer kept
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, max))
}
