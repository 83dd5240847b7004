/**
 * Shared by the engine unit tests: compile a bundle document the way the
 * gateway does (loadBundleBytes), build request views, and run a real
 * MemoryStore with an observer that records what the engine reported.
 */
import assert from 'node:assert/strict'
import type { BlockList } from 'node:net'
import { loadBundleBytes } from '../../src/bundle/load.js'
import type { CompiledBundle } from '../../src/bundle/compile.js'
import type { Decision, EngineObserver, ShadowReject } from '../../src/engine/decision.js'
import { Engine } from '../../src/engine/evaluate.js'
import { type EncodedSlashes, readTarget } from '../../src/request/target.js'
import { RequestView } from '../../src/request/view.js'
import { MemoryStore } from '../../src/store/memory/store.js'

/** 2026-01-01T00:00:00Z in ms: the clock every engine test starts from. */
export const T0 = Date.UTC(2026, 0, 1)

export function compile(doc: object, nowMs = T0): CompiledBundle {
  const r = loadBundleBytes(Buffer.from(JSON.stringify(doc)), 'test.json', nowMs)
  if (!r.ok) assert.fail(`bundle did not load: ${r.errors.join('; ')}`)
  assert.deepEqual(r.dropped, [], 'no policy may be dropped')
  return r.bundle
}

export interface Req {
  method?: string
  path?: string
  query?: string
  host?: string
  headers?: Record<string, string | string[]>
  peer?: string
  jwt?: Record<string, unknown>
  /** A request body (LLM rules read it), sent with its Content-Length. */
  body?: string
  /** FAIRVISOR_ENCODED_SLASHES for reading `path` (default: the gateway's, reject). */
  slashes?: EncodedSlashes
}

export function b64url(v: unknown): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url')
}

export function bearer(claims: Record<string, unknown>): string {
  return `Bearer ${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.c2ln`
}

export function view(r: Req = {}, trusted?: BlockList): RequestView {
  const raw: string[] = []
  for (const [k, v] of Object.entries(r.headers ?? {})) for (const x of Array.isArray(v) ? v : [v]) raw.push(k, x)
  if (r.jwt) raw.push('Authorization', bearer(r.jwt))
  const body = r.body === undefined ? undefined : Buffer.from(r.body)
  if (body) raw.push('Content-Length', String(body.length))
  const host = r.host ?? 'localhost'
  // The path as a request line carries it, read as the transports read it (request/target.ts).
  const target = readTarget(r.path ?? '/x', host, r.slashes ?? 'reject')
  return new RequestView(
    {
      method: r.method ?? 'GET',
      path: target.path,
      alsoPaths: target.alsoPaths,
      refused: target.refused,
      rawQuery: r.query ?? '',
      host,
      rawHeaders: raw,
      peer: r.peer ?? '10.0.0.1',
      body,
    },
    trusted,
  )
}

export class Recorder implements EngineObserver {
  missing: string[] = []
  shadow: ShadowReject[] = []
  errors: Error[] = []
  descriptorMissing(key: string): void {
    this.missing.push(key)
  }
  shadowReject(r: ShadowReject): void {
    this.shadow.push(r)
  }
  storeError(err: Error): void {
    this.errors.push(err)
  }
}

/** One engine over one real memory store; `run` evaluates a request at T0 + `atS` seconds. */
export class Harness {
  readonly store = new MemoryStore({ maxBytes: 1 << 20 })
  readonly obs = new Recorder()
  readonly engine = new Engine({ store: this.store, failPolicy: 'open', observer: this.obs })
  constructor(readonly bundle: CompiledBundle) {}

  run(r: Req = {}, atS = 0): Decision {
    let d: Decision | undefined
    this.engine.evaluate(this.bundle, view(r), T0 + atS * 1000, false, (x) => (d = x))
    assert.ok(d !== undefined, 'the memory store answers synchronously')
    return d
  }

  /** RateLimit-Remaining the request would see (undefined: no enforce limit). */
  remaining(r: Req = {}, atS = 0): number | 'rejected' | undefined {
    const d = this.run(r, atS)
    return d.allowed ? d.limit?.remaining : 'rejected'
  }
}

export const tb = (rate: number, burst: number, extra: object = {}): object => ({ tokens_per_second: rate, burst, ...extra })

export function rule(name: string, limitKeys: string[], config: object, extra: object = {}): object {
  return { name, limit_keys: limitKeys, algorithm: 'token_bucket', algorithm_config: config, ...extra }
}

export function policy(id: string, rules: object[], spec: object = {}, selector: object = { pathPrefix: '/' }): object {
  return { id, spec: { selector, mode: 'enforce', rules, ...spec } }
}

export function bundle(policies: object[], extra: object = {}): object {
  return { bundle_version: 1, policies, ...extra }
}
