/**
 * The gRPC services the gateway serves, loaded from the .proto files in
 * proto/ by @grpc/proto-loader (protobufjs underneath; docs/dependencies.md
 * says why over @bufbuild/protobuf). Messages are plain objects: field names as
 * in the .proto (keepCase), enums and 64-bit integers as numbers.
 */
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { MethodDefinition, PackageDefinition } from '@grpc/proto-loader'
import { GrpcServiceMissing } from '../errors.js'

const require = createRequire(import.meta.url)

/** proto/ at the package root: two levels above dist/grpc/ (and src/grpc/ under tsx). */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url))

export const PROTO_FILES = [
  'envoy/service/auth/v3/external_auth.proto',
  'envoy/service/ratelimit/v3/rls.proto',
  'grpc/health/v1/health.proto',
]

export const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true, includeDirs: [PROTO_DIR] }

let loaded: PackageDefinition | undefined
/** Loaded on first use, with @grpc/proto-loader and protobufjs: a gateway without FAIRVISOR_GRPC_PORT never loads them. */
export function packageDefinition(): PackageDefinition {
  if (loaded !== undefined) return loaded
  const { loadSync } = require('@grpc/proto-loader') as typeof import('@grpc/proto-loader')
  return (loaded = loadSync(PROTO_FILES, LOADER_OPTIONS))
}

/** One method of a service: its full path (`/package.Service/Method`) and its codec. */
export interface MethodCodec {
  path: string
  /** Request bytes → message (throws on bytes that do not decode). */
  decode(b: Buffer): unknown
  /** Response message → bytes. */
  encode(m: unknown): Buffer
  /** Request message → bytes and response bytes → message (what a client does: tests and benchmarks). */
  encodeRequest(m: object): Buffer
  decodeResponse(b: Buffer): unknown
}

export function method(serviceName: string, name: string): MethodCodec {
  const service = packageDefinition()[serviceName] as Record<string, MethodDefinition<object, object>> | undefined
  const m = service?.[name]
  if (m === undefined) throw new GrpcServiceMissing(`${serviceName}/${name}`)
  return {
    path: m.path,
    decode: (b) => m.requestDeserialize(b),
    encode: (v) => m.responseSerialize(v as object),
    encodeRequest: (v) => m.requestSerialize(v),
    decodeResponse: (b) => m.responseDeserialize(b),
  }
}
