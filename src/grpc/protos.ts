/**
 * The gRPC services the gateway serves, loaded from the .proto files in
 * proto/ (@grpc/proto-loader; see the README for why it over @bufbuild/protobuf).
 * Messages are plain objects: field names as in the .proto (keepCase), enums
 * and 64-bit integers as numbers.
 */
import { fileURLToPath } from 'node:url'
import type { ServiceDefinition } from '@grpc/grpc-js'
import { loadSync, type PackageDefinition } from '@grpc/proto-loader'
import { GrpcServiceMissing } from '../errors.js'

/** proto/ at the package root: two levels above dist/grpc/ (and src/grpc/ under tsx). */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url))

export const PROTO_FILES = [
  'envoy/service/auth/v3/external_auth.proto',
  'envoy/service/ratelimit/v3/rls.proto',
  'grpc/health/v1/health.proto',
]

export const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true, includeDirs: [PROTO_DIR] }

/** A request that did not decode: the handler answers INVALID_ARGUMENT (grpc-js alone would answer INTERNAL). */
export class Undecodable {
  constructor(readonly message: string) {}
}

let loaded: PackageDefinition | undefined
export function packageDefinition(): PackageDefinition {
  return (loaded ??= loadSync(PROTO_FILES, LOADER_OPTIONS))
}

/** One service, with its request decoder turned into one that never throws. */
export function service(name: string): ServiceDefinition {
  const def = packageDefinition()[name] as ServiceDefinition | undefined
  if (def === undefined) throw new GrpcServiceMissing(name)
  const out: Record<string, ServiceDefinition[string]> = {}
  for (const [method, m] of Object.entries(def)) {
    const decode = m.requestDeserialize
    out[method] = {
      ...m,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return decode(bytes)
        } catch (err) {
          return new Undecodable((err as Error).message)
        }
      },
    }
  }
  return out as ServiceDefinition
}
