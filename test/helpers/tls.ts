import { webcrypto } from 'node:crypto'
import 'reflect-metadata'
import * as x509 from '@peculiar/x509'

// A certificate authority and a certificate for localhost it signed, made when a test asks for them
// (none is kept in the tree): for the fake TLS servers of the database URL and osctl tests.

export interface TestTls {
  /** The CA's certificate, PEM: what a client is told to trust. */
  ca: string
  /** The server's certificate (for localhost only, not its address) and its key, PEM. */
  cert: string
  key: string
}

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }

let made: Promise<TestTls> | undefined

/** The test CA and server certificate, made once per process (a few ms). */
export function testTls(): Promise<TestTls> {
  made ??= (async () => {
    // Node's WebCrypto, which the DOM types it is declared with do not name.
    x509.cryptoProvider.set(webcrypto as never)
    const notBefore = new Date(Date.now() - 60_000)
    const notAfter = new Date(Date.now() + 86_400_000)
    const caKeys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])
    const ca = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: '01',
      name: 'CN=osd test CA',
      notBefore,
      notAfter,
      keys: caKeys,
      signingAlgorithm: algorithm,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
      ],
    })
    const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: '02',
      subject: 'CN=localhost',
      issuer: ca.subject,
      notBefore,
      notAfter,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: algorithm,
      extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'localhost' }])],
    })
    const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey))
    return {
      ca: ca.toString('pem'),
      cert: cert.toString('pem'),
      key: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY'),
    }
  })()
  return made
}
