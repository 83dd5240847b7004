/** gRPC clients for the gateway's services, built from the .proto files in proto/. */
import {
  type ChannelCredentials,
  credentials,
  loadPackageDefinition,
  makeGenericClientConstructor,
  type Client,
  type ServiceError,
} from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'
import { LOADER_OPTIONS, PROTO_FILES } from '../../src/grpc/protos.js'

// biome-ignore lint/suspicious/noExplicitAny: proto-loader builds the clients at run time, untyped; the tests assert on the reply fields, and typing every message here would copy the .proto files.
type Any = any
const pkg = loadPackageDefinition(loadSync(PROTO_FILES, LOADER_OPTIONS)) as Any

export interface GrpcClients {
  authz: Client
  rls: Client
  health: Client
  check(req: object): Promise<Any>
  shouldRateLimit(req: object): Promise<Any>
  healthCheck(service?: string): Promise<Any>
  /** Sends `bytes` as the request of `path` (a full method path), bypassing the encoder. */
  raw(path: string, bytes: Buffer): Promise<Any>
  close(): void
}

const unary =
  (client: Client, method: string) =>
  (req: object): Promise<Any> =>
    new Promise((resolve, reject) =>
      (client as Any)[method](req, (err: ServiceError | null, res: Any) => (err ? reject(err) : resolve(res))),
    )

/** `creds`: plaintext by default; a test of the TLS listener passes `credentials.createSsl(…)`. */
export function grpcClients(port: number, creds: ChannelCredentials = credentials.createInsecure()): GrpcClients {
  const address = `127.0.0.1:${port}`
  const authz = new pkg.envoy.service.auth.v3.Authorization(address, creds) as Client
  const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(address, creds) as Client
  const health = new pkg.grpc.health.v1.Health(address, creds) as Client
  const Raw = makeGenericClientConstructor({}, 'Raw')
  const raw = new Raw(address, creds)
  return {
    authz,
    rls,
    health,
    check: unary(authz, 'Check'),
    shouldRateLimit: unary(rls, 'ShouldRateLimit'),
    healthCheck: (service = '') => unary(health, 'Check')({ service }),
    raw: (path, bytes) =>
      new Promise((resolve, reject) =>
        raw.makeUnaryRequest(
          path,
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          (err, res) => (err ? reject(err) : resolve(res)),
        ),
      ),
    close() {
      for (const c of [authz, rls, health, raw]) c.close()
    },
  }
}

/** A CheckRequest as Envoy's ext_authz filter sends it. */
export function checkRequest(o: { method?: string; path: string; host?: string; headers?: Record<string, string>; peer?: string }): object {
  return {
    attributes: {
      source: { address: { socket_address: { address: o.peer ?? '192.0.2.7', port_value: 40000 } } },
      request: {
        http: {
          method: o.method ?? 'GET',
          path: o.path,
          host: o.host ?? 'api.example.com',
          scheme: 'http',
          protocol: 'HTTP/1.1',
          headers: { ':authority': o.host ?? 'api.example.com', ':method': o.method ?? 'GET', ':path': o.path, ...o.headers },
        },
      },
    },
  }
}

/** Flat header list of a HeaderValueOption list. */
export function headerList(options: Array<{ header: { key: string; value: string } }> | undefined): string[] {
  return (options ?? []).flatMap((o) => [o.header.key, o.header.value])
}

/** A google.protobuf.Struct as decoded (each value with its `kind`) → the plain value it stands for. */
export function structToJs(s: { fields?: Record<string, Any> } | undefined): Record<string, unknown> | undefined {
  if (s === undefined || s === null) return undefined
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = valueToJs(v)
  return out
}

function valueToJs(v: Any): unknown {
  switch (v.kind) {
    case 'structValue':
      return structToJs(v.structValue)
    case 'listValue':
      return (v.listValue.values ?? []).map(valueToJs)
    case 'nullValue':
      return null
    default:
      return v[v.kind]
  }
}
