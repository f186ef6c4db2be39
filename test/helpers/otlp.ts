import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

// An OTLP/HTTP trace receiver in the test process (issue 49): what a collector would get from osd,
// POST /v1/traces as http/protobuf or http/json, decoded into one shape. The protobuf is read by the
// small decoder below: otlp-transformer writes ExportTraceServiceRequest by hand (it ships no
// generated protobuf root to read one with), and protobufjs is not installed. Field numbers are those
// of opentelemetry-proto's trace.proto, common.proto and resource.proto.

export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  /** 1 internal, 2 server, 3 client (SpanKind + 1, as OTLP numbers them). */
  kind: number
  startMs: number
  endMs: number
  attributes: Record<string, unknown>
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string }
  resource: Record<string, unknown>
}

export interface OtlpReceiver {
  /** The endpoint to set as OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces). */
  url: string
  spans: ReceivedSpan[]
  /** The content type and path of every request received. */
  requests: { path: string; contentType: string }[]
  close(): Promise<void>
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const requests: OtlpReceiver['requests'] = []
  const server = createServer((req, res) => {
    void body(req).then((data) => {
      const contentType = String(req.headers['content-type'] ?? '')
      requests.push({ path: req.url ?? '', contentType })
      try {
        spans.push(
          ...(contentType.includes('json')
            ? fromJson(JSON.parse(data.toString('utf8')))
            : fromProtobuf(data)),
        )
        res
          .writeHead(200, { 'content-type': contentType })
          .end(contentType.includes('json') ? '{}' : '')
      } catch (err) {
        res.writeHead(400).end(String(err))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function body(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

// --- http/json ------------------------------------------------------------------------------------

interface JsonValue {
  stringValue?: string
  boolValue?: boolean
  intValue?: number | string
  doubleValue?: number
  arrayValue?: { values?: JsonValue[] }
}

function jsonValue(value: JsonValue | undefined): unknown {
  if (!value) return undefined
  if (value.stringValue !== undefined) return value.stringValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(jsonValue)
  return undefined
}

function jsonAttributes(list: { key: string; value: JsonValue }[] | undefined) {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, jsonValue(kv.value)]))
}

function fromJson(request: {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: JsonValue }[] }
    scopeSpans?: { spans?: Record<string, unknown>[] }[]
  }[]
}): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((rs) => {
    const resource = jsonAttributes(rs.resource?.attributes)
    return (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s): ReceivedSpan => ({
        traceId: String(s.traceId),
        spanId: String(s.spanId),
        parentSpanId: String(s.parentSpanId ?? ''),
        name: String(s.name),
        kind: Number(s.kind ?? 0),
        startMs: Number(BigInt(String(s.startTimeUnixNano)) / 1_000_000n),
        endMs: Number(BigInt(String(s.endTimeUnixNano)) / 1_000_000n),
        attributes: jsonAttributes(s.attributes as { key: string; value: JsonValue }[]),
        status: {
          code: Number((s.status as { code?: number } | undefined)?.code ?? 0),
          message: (s.status as { message?: string } | undefined)?.message,
        },
        resource,
      })),
    )
  })
}

// --- http/protobuf --------------------------------------------------------------------------------

/** The fields of one protobuf message: number -> values in order (varints as bigint, the rest bytes). */
type Fields = Map<number, (bigint | Buffer)[]>

function fields(buf: Buffer): Fields {
  const out: Fields = new Map()
  let at = 0
  const varint = (): bigint => {
    let result = 0n
    let shift = 0n
    for (;;) {
      const byte = buf[at++]!
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return result
      shift += 7n
    }
  }
  while (at < buf.length) {
    const key = Number(varint())
    const [field, wire] = [key >> 3, key & 7]
    let value: bigint | Buffer
    if (wire === 0) value = varint()
    else if (wire === 1) value = buf.subarray(at, (at += 8))
    else if (wire === 5) value = buf.subarray(at, (at += 4))
    else if (wire === 2) {
      const length = Number(varint())
      value = buf.subarray(at, (at += length))
    } else throw new Error(`wire type ${wire} not expected`)
    out.set(field, [...(out.get(field) ?? []), value])
  }
  return out
}

const bytesOf = (f: Fields, n: number) => (f.get(n)?.[0] as Buffer | undefined) ?? Buffer.alloc(0)
const allBytes = (f: Fields, n: number) => (f.get(n) ?? []) as Buffer[]
const text = (f: Fields, n: number) => bytesOf(f, n).toString('utf8')
const number = (f: Fields, n: number) => Number((f.get(n)?.[0] as bigint | undefined) ?? 0n)

function anyValue(buf: Buffer): unknown {
  const f = fields(buf)
  if (f.has(1)) return text(f, 1)
  if (f.has(2)) return number(f, 2) !== 0
  if (f.has(3)) return Number(BigInt.asIntN(64, f.get(3)![0] as bigint))
  if (f.has(4)) return bytesOf(f, 4).readDoubleLE(0)
  if (f.has(5)) return allBytes(fields(bytesOf(f, 5)), 1).map(anyValue)
  return undefined
}

function attributes(list: Buffer[]): Record<string, unknown> {
  return Object.fromEntries(
    list.map((kv) => {
      const f = fields(kv)
      return [text(f, 1), anyValue(bytesOf(f, 2))]
    }),
  )
}

const nanosToMs = (b: Buffer) => Number(b.readBigUInt64LE(0) / 1_000_000n)

function fromProtobuf(buf: Buffer): ReceivedSpan[] {
  return allBytes(fields(buf), 1).flatMap((rsBuf) => {
    const rs = fields(rsBuf)
    const resource = attributes(allBytes(fields(bytesOf(rs, 1)), 1))
    return allBytes(rs, 2).flatMap((ssBuf) =>
      allBytes(fields(ssBuf), 2).map((spanBuf): ReceivedSpan => {
        const s = fields(spanBuf)
        const status = fields(bytesOf(s, 15))
        return {
          traceId: bytesOf(s, 1).toString('hex'),
          spanId: bytesOf(s, 2).toString('hex'),
          parentSpanId: bytesOf(s, 4).toString('hex'),
          name: text(s, 5),
          kind: number(s, 6),
          startMs: nanosToMs(bytesOf(s, 7)),
          endMs: nanosToMs(bytesOf(s, 8)),
          attributes: attributes(allBytes(s, 9)),
          status: { code: number(status, 3), message: text(status, 2) || undefined },
          resource,
        }
      }),
    )
  })
}
