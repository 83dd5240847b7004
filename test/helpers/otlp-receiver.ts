/**
 * A real OTLP/HTTP trace receiver for end-to-end tests: a node:http server on port 0 that takes
 * `POST /v1/traces` (protobuf ExportTraceServiceRequest), decodes it with the official
 * opentelemetry-proto definitions vendored in test/fixtures/otlp/ (by @grpc/proto-loader, protobufjs
 * underneath), and keeps every span with its resource. Tests wait on what arrives (waitFor), each
 * export request being the event that re-checks.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { loadSync, type MethodDefinition } from '@grpc/proto-loader'

const PROTO_DIR = fileURLToPath(new URL('../fixtures/otlp/', import.meta.url))
const SERVICE = 'opentelemetry.proto.collector.trace.v1.TraceService'

type Value = string | number | boolean
export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  /** SPAN_KIND_SERVER, SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL, … */
  kind: string
  attributes: Record<string, Value>
  links: { traceId: string; spanId: string }[]
  /** STATUS_CODE_UNSET, STATUS_CODE_OK, STATUS_CODE_ERROR */
  status: string
  resource: Record<string, Value>
  startNs: bigint
  endNs: bigint
}

export interface OtlpReceiver {
  /** The endpoint to give the gateway (OTEL_EXPORTER_OTLP_ENDPOINT form: `/v1/traces` is appended). */
  endpoint: string
  spans: ReceivedSpan[]
  /** Export requests that were not `POST /v1/traces` with a protobuf body that decodes. */
  refused: string[]
  /** Resolves once `pred` holds of the spans received so far; rejects after `timeoutMs` naming `what` and what came. */
  waitFor<T>(what: string, pred: (spans: ReceivedSpan[]) => T | undefined, timeoutMs?: number): Promise<T>
  close(): Promise<void>
}

// biome-ignore lint/suspicious/noExplicitAny: proto-loader decodes to plain untyped objects; the fields read below are the .proto's.
type Any = any

const hex = (b: Buffer | undefined): string => (b === undefined ? '' : Buffer.from(b).toString('hex'))

function attributeValue(v: Any): Value {
  const kind = v?.value as string | undefined
  if (kind === 'int_value') return Number(v.int_value)
  if (kind === 'string_value' || kind === 'bool_value' || kind === 'double_value') return v[kind]
  return JSON.stringify(v)
}

function attributes(list: Any[] | undefined): Record<string, Value> {
  const out: Record<string, Value> = {}
  for (const kv of list ?? []) out[kv.key] = attributeValue(kv.value)
  return out
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const def = loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
    includeDirs: [PROTO_DIR],
  })
  const exportMethod = (def[SERVICE] as Record<string, MethodDefinition<object, object>>).Export!
  const spans: ReceivedSpan[] = []
  const refused: string[] = []
  const listeners = new Set<() => void>()
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      try {
        if (req.method !== 'POST' || req.url !== '/v1/traces' || req.headers['content-type'] !== 'application/x-protobuf')
          throw new Error(`${req.method} ${req.url} ${req.headers['content-type']}`)
        const msg = exportMethod.requestDeserialize(Buffer.concat(chunks)) as Any
        for (const rs of msg.resource_spans ?? []) {
          const resource = attributes(rs.resource?.attributes)
          for (const ss of rs.scope_spans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                traceId: hex(s.trace_id),
                spanId: hex(s.span_id),
                parentSpanId: hex(s.parent_span_id),
                name: s.name,
                kind: s.kind ?? 'SPAN_KIND_UNSPECIFIED',
                attributes: attributes(s.attributes),
                links: (s.links ?? []).map((l: Any) => ({ traceId: hex(l.trace_id), spanId: hex(l.span_id) })),
                status: s.status?.code ?? 'STATUS_CODE_UNSET',
                resource,
                startNs: BigInt(s.start_time_unix_nano ?? 0),
                endNs: BigInt(s.end_time_unix_nano ?? 0),
              })
        }
        // An empty ExportTraceServiceResponse: everything accepted.
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(exportMethod.responseSerialize({}))
      } catch (err) {
        refused.push((err as Error).message)
        res.writeHead(400).end()
      }
      for (const l of listeners) l()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    refused,
    waitFor<T>(what: string, pred: (spans: ReceivedSpan[]) => T | undefined, timeoutMs = 30_000): Promise<T> {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const found = pred(spans)
          if (found === undefined || found === false) return false
          listeners.delete(check)
          clearTimeout(timer)
          resolve(found)
          return true
        }
        const timer = setTimeout(() => {
          listeners.delete(check)
          const seen = spans.map((s) => `${s.name} ${s.traceId.slice(0, 8)}/${s.spanId.slice(0, 8)}<-${s.parentSpanId.slice(0, 8)}`)
          reject(
            new Error(`${what}: not received within ${timeoutMs} ms; spans so far: ${seen.join(', ')}; refused: ${refused.join('; ')}`),
          )
        }, timeoutMs)
        listeners.add(check)
        check()
      })
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}
