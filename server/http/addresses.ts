import { BlockList, isIP } from 'node:net'

// Who is calling, by network address (issue 44): the address the rate limits of the routes that take
// no token count by, and what a refused webhook call keeps. A leaf module: config.ts parses with it.

/** `10.0.0.0/8`, `::1` or `fd00::/8` as [address, prefix, family]; undefined when it is none of these. */
export function parseCidr(text: string): [string, number, 'ipv4' | 'ipv6'] | undefined {
  const [address = '', prefixText, rest] = text.trim().split('/')
  if (rest !== undefined) return undefined
  const family = isIP(address)
  if (family === 0) return undefined
  const bits = family === 4 ? 32 : 128
  const prefix = prefixText === undefined ? bits : Number(prefixText)
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > bits || prefixText === '')
    return undefined
  return [address, prefix, family === 4 ? 'ipv4' : 'ipv6']
}

/** The networks of OSD_TRUSTED_PROXIES as a set to test addresses against. */
export function networks(cidrs: string[]): BlockList {
  const list = new BlockList()
  for (const cidr of cidrs) {
    const [address, prefix, family] = parseCidr(cidr)!
    list.addSubnet(address, prefix, family)
  }
  return list
}

/** An IPv4 address written as IPv6 (::ffff:10.0.0.1, as a dual-stack socket says) as IPv4. */
export function plainAddress(address: string): string {
  const lower = address.trim().toLowerCase()
  return lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower
}

function contains(list: BlockList, address: string): boolean {
  const family = isIP(address)
  return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * The address of one hop of X-Forwarded-For, written as proxies write it: an address, or with the port
 * it was called from (`203.0.113.9:4711`, `[2001:db8::1]:4711`, as Azure's front ends write them).
 */
function hopAddress(hop: string): string {
  const text = hop.trim()
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text)
  if (bracketed) return plainAddress(bracketed[1]!)
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text)
  return plainAddress(withPort ? withPort[1]! : text)
}

/**
 * The client's address: the socket's peer, unless the peer is a trusted proxy; then the first hop of
 * X-Forwarded-For, read from the right, that is not a trusted proxy (each proxy appends the address
 * it was called from, so only the hops right of the first untrusted one can be believed). A hop that
 * is not an address (with its port or without) ends the walk: what lies left of it was written by
 * someone osd does not trust.
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trusted: BlockList | undefined,
): string {
  let client = plainAddress(peer ?? '')
  if (!trusted || !forwardedFor || !contains(trusted, client)) return client || 'unknown'
  const hops = forwardedFor.split(',')
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hopAddress(hops[i]!)
    if (isIP(hop) === 0) break
    client = hop
    if (!contains(trusted, hop)) break
  }
  return client
}

/**
 * The key an address is counted under: an IPv6 address by its /64, the block one subscriber is given
 * (counted one by one, a single host could take a fresh address for every request).
 */
export function addressKey(address: string): string {
  if (isIP(address) !== 6) return address
  const groups = expandIpv6(address)
  return groups ? `${groups.slice(0, 4).join(':')}::/64` : address
}

function expandIpv6(address: string): string[] | undefined {
  const bare = address.split('%')[0]!
  const [head = '', tail] = bare.split('::')
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  // An embedded IPv4 tail (::ffff:1.2.3.4 that plainAddress did not take) counts as two groups.
  const last = right.length ? right : left
  if (last.length && last[last.length - 1]!.includes('.')) last.splice(-1, 1, '0', '0')
  const missing = 8 - left.length - right.length
  if (tail === undefined && missing !== 0) return undefined
  const groups = [...left, ...Array(Math.max(0, missing)).fill('0'), ...right]
  return groups.map((g) => parseInt(g || '0', 16).toString(16))
}
