import { describe, expect, it } from 'vitest'
import {
  addressRefusal,
  checkUrl,
  parseEgressAllow,
  strictEgress,
  type EgressRule,
  type ResolvedAddress,
} from '../../server/egress.js'
import { loadConfig } from '../../server/config.js'

// The egress rule (DESIGN 15; issue 44) on its own: which addresses and names osd refuses to reach
// for a tenant, how OSD_EGRESS_ALLOW lets some through, and the save-time check of a URL. The routes
// and the connections that use it are tested in test/server/http/hostile-egress.test.ts.

const rule = (allow: string, answers: Record<string, string[]> = {}): EgressRule => ({
  allow: parseEgressAllow(allow),
  resolve: async (name) => {
    const addresses = answers[name]
    if (!addresses) throw Object.assign(new Error(`no such name ${name}`), { code: 'ENOTFOUND' })
    return addresses.map((address): ResolvedAddress => ({
      address,
      family: address.includes(':') ? 6 : 4,
    }))
  },
})

describe('addresses osd refuses unless allowed', () => {
  it.each([
    ['127.0.0.1', 'a loopback address'],
    ['127.255.0.9', 'a loopback address'],
    ['::1', 'a loopback address'],
    ['169.254.169.254', 'a link-local address (the cloud metadata service)'],
    ['169.254.1.1', 'a link-local address'],
    ['fe80::1', 'a link-local address'],
    ['fd00:ec2::254', 'a link-local address (the cloud metadata service)'],
    ['10.0.0.1', 'a private address'],
    ['172.16.0.1', 'a private address'],
    ['172.31.255.255', 'a private address'],
    ['192.168.1.1', 'a private address'],
    ['100.64.0.1', 'a private address (shared address space)'],
    ['100.100.100.200', 'a private address (shared address space)'],
    ['fc00::1', 'a private address'],
    ['fdff::1', 'a private address'],
    ['0.0.0.0', 'an unspecified address'],
    ['::', 'an unspecified address'],
    ['224.0.0.1', 'a multicast address'],
    ['ff02::1', 'a multicast address'],
    ['255.255.255.255', 'a reserved address'],
  ])('%s is %s', (address, words) => {
    expect(addressRefusal(address, strictEgress)).toBe(`${address} is ${words}`)
  })

  it.each([
    ['::ffff:127.0.0.1', '127.0.0.1', 'a loopback address'],
    ['::ffff:7f00:1', '127.0.0.1', 'a loopback address'],
    ['::ffff:a9fe:a9fe', '169.254.169.254', 'a link-local address (the cloud metadata service)'],
    ['::ffff:10.0.0.1', '10.0.0.1', 'a private address'],
    ['64:ff9b::a00:1', '10.0.0.1', 'a private address'],
    ['2002:7f00:1::1', '127.0.0.1', 'a loopback address'],
  ])('%s, IPv4 %s written as IPv6, is refused as that', (address, inner, words) => {
    expect(addressRefusal(address, strictEgress)).toBe(
      `${address} is ${words} (${inner} written as IPv6)`,
    )
  })

  it.each([
    '8.8.8.8',
    '93.184.215.14',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
  ])('lets the public address %s through', (address) => {
    expect(addressRefusal(address, strictEgress)).toBeUndefined()
  })

  it('lets through what OSD_EGRESS_ALLOW names, mapped forms included, and nothing next to it', () => {
    const allowed = rule('127.0.0.0/8, ::1 ,10.1.0.0/16,[fd12::]/16')
    for (const address of [
      '127.0.0.1',
      '127.9.9.9',
      '::1',
      '::ffff:127.0.0.1',
      '10.1.200.3',
      'fd12::5',
    ])
      expect(addressRefusal(address, allowed), address).toBeUndefined()
    for (const address of ['10.2.0.1', '169.254.169.254', 'fd13::5', '0.0.0.0'])
      expect(addressRefusal(address, allowed), address).toMatch(/ is an? /)
  })
})

describe('OSD_EGRESS_ALLOW', () => {
  it('reads networks, addresses and names, and refuses what is neither', () => {
    expect(parseEgressAllow(' 127.0.0.0/8,::1, tools.corp.example. ,*.svc.local, ')).toMatchObject({
      names: ['tools.corp.example'],
      suffixes: ['svc.local'],
    })
    expect(parseEgressAllow('127.0.0.0/8,::1').networks).toHaveLength(2)
    expect(parseEgressAllow(undefined)).toEqual({ networks: [], names: [], suffixes: [] })
    expect(() => parseEgressAllow('10.0.0.0/33')).toThrow(/10\.0\.0\.0\/33.*not a network/)
    expect(() => parseEgressAllow('http://tools.example/')).toThrow(/neither a network/)
  })

  it('is parsed once with the configuration, which refuses a wrong one at start', () => {
    expect(loadConfig({}, { OSD_EGRESS_ALLOW: '10.0.0.0/8' }).egress.allow.networks).toHaveLength(1)
    expect(loadConfig({}, {}).egress.allow).toEqual({ networks: [], names: [], suffixes: [] })
    expect(() => loadConfig({}, { OSD_EGRESS_ALLOW: '10.0.0.0/40' })).toThrow(/OSD_EGRESS_ALLOW/)
  })
})

describe('checkUrl, the check on save', () => {
  it('takes http and https only', async () => {
    for (const url of [
      'file:///etc/passwd',
      'gopher://127.0.0.1:6379/_INFO',
      'ftp://tools.example/',
    ])
      expect(await checkUrl(url, rule('127.0.0.0/8')), url).toMatch(
        /addresses are not allowed: osd connects to http and https only/,
      )
  })

  it('resolves a name and refuses it when any of its addresses is refused', async () => {
    const dns = rule('', {
      'mixed.test': ['93.184.215.14', '10.0.0.7'],
      'public.test': ['93.184.215.14'],
    })
    expect(await checkUrl('https://mixed.test/mcp', dns)).toBe(
      'mixed.test resolves to 10.0.0.7, a private address; set OSD_EGRESS_ALLOW to allow it',
    )
    expect(await checkUrl('https://public.test/mcp', dns)).toBeUndefined()
  })

  it('asks the system resolver unless given one: localhost is loopback', async () => {
    expect(await checkUrl('http://localhost:5432/', strictEgress)).toMatch(
      /^localhost resolves to (127\.0\.0\.1|::1), a loopback address; set OSD_EGRESS_ALLOW to allow it$/,
    )
    expect(
      await checkUrl('http://localhost:5432/', { allow: parseEgressAllow('127.0.0.0/8,::1') }),
    ).toBeUndefined()
  })

  it('refuses metadata names whatever they resolve to, unless the name is allowed', async () => {
    const dns = rule('', { 'metadata.google.internal': ['93.184.215.14'] })
    expect(await checkUrl('http://metadata.google.internal/computeMetadata/v1/', dns)).toBe(
      'metadata.google.internal is a cloud metadata name; set OSD_EGRESS_ALLOW to allow it',
    )
    expect(await checkUrl('http://METADATA./', dns)).toMatch(/^metadata is a cloud metadata name/)
    expect(
      await checkUrl(
        'http://metadata.google.internal/',
        rule('metadata.google.internal', { 'metadata.google.internal': ['169.254.169.254'] }),
      ),
    ).toBeUndefined()
  })

  it('lets an allowed name through whatever it resolves to, and its subdomains with *.', async () => {
    const answers = {
      'tools.corp.test': ['10.0.0.5'],
      'a.svc.test': ['10.0.0.6'],
      'svc.test': ['10.0.0.7'],
    }
    const allowed = rule('tools.corp.test,*.svc.test', answers)
    expect(await checkUrl('http://tools.corp.test/mcp', allowed)).toBeUndefined()
    expect(await checkUrl('http://a.svc.test/mcp', allowed)).toBeUndefined()
    expect(await checkUrl('http://svc.test/mcp', allowed)).toMatch(/10\.0\.0\.7, a private address/)
  })

  it('normalises addresses written another way before it judges them', async () => {
    for (const url of [
      'http://0x7f.1/',
      'http://2130706433/',
      'http://0177.0.0.1/',
      'http://127.1/',
    ])
      expect(await checkUrl(url, strictEgress), url).toMatch(/^127\.0\.0\.1 is a loopback address/)
    expect(await checkUrl('http://[::ffff:127.0.0.1]:8080/', strictEgress)).toMatch(
      /^::ffff:7f00:1 is a loopback address \(127\.0\.0\.1 written as IPv6\)/,
    )
  })

  it('lets a name that does not resolve now through: it is checked again when osd connects', async () => {
    expect(await checkUrl('https://not-yet.test/mcp', rule(''))).toBeUndefined()
  })
})
