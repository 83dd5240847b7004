/**
 * envoyproxy/ratelimit's own test cases through the real gateway over gRPC,
 * on every store: the stores (in-process, shared memory of two workers, a
 * Redis of the test's own, PostgreSQL under a prefix of the run), one
 * gateway per store serving an RLS configuration directory, calls and
 * answers in the shape upstream's tests assert them, and the guard that
 * keeps a sequence of calls inside one time window (upstream's tests mock
 * the clock; here it is the machine's).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { after, before, describe } from 'node:test'
import { grpcClients, type GrpcClients } from './grpc-client.js'
import { dropPrefix, PG_URL, uniquePrefix } from './postgres-db.js'
import { ROOT, startGateway, type GatewayProcess, type LogLine } from './processes.js'
import { startRedis } from './redis-servers.js'

export const UPSTREAM = join(ROOT, 'test/fixtures/rls/upstream')

/** RateLimitResponse.Code. */
export const OK = 1
export const OVER_LIMIT = 2
/** RateLimitResponse.RateLimit.Unit. */
export const SECOND = 1
export const MINUTE = 2
export const HOUR = 3
export const DAY = 4
/** What an `unlimited` descriptor reports left (math.MaxUint32 upstream). */
export const MAX_UINT32 = 4294967295

export interface Limit {
  requests_per_unit: number
  unit: number
  name?: string
}
/** A DescriptorStatus without its duration_until_reset (read apart: it depends on the clock). */
export interface Status {
  code: number
  limit?: Limit
  remaining: number
}
export interface Answer {
  overall: number
  statuses: Status[]
  /** duration_until_reset of each status, in seconds (undefined when absent). */
  resets: Array<number | undefined>
  headers: Record<string, string>
  /** Wall-clock time (ms) before the call and after its answer: the gateway decided it in between. */
  at: [number, number]
}

export type Entries = Array<[string, string]>
export interface Descriptor {
  entries: Entries
  /** The descriptor's own hits_addend (0 included); absent: the request's. */
  hits?: number
}
export const d = (entries: Entries, hits?: number): Descriptor => ({ entries, hits })
/** An expected status, as upstream's tests write one. */
export const st = (code: number, limit?: Limit, remaining = 0): Status =>
  limit === undefined ? { code, remaining } : { code, limit, remaining }
export const lim = (requests_per_unit: number, unit: number, name?: string): Limit =>
  name === undefined ? { requests_per_unit, unit } : { requests_per_unit, unit, name }

interface WireStatus {
  code?: number
  current_limit?: { requests_per_unit?: number; unit?: number; name?: string } | null
  limit_remaining?: number
  duration_until_reset?: { seconds?: number } | null
}

function status(s: WireStatus): Status {
  const l = s.current_limit
  const limit = l ? lim(l.requests_per_unit ?? 0, l.unit ?? 0, l.name || undefined) : undefined
  return st(s.code ?? 0, limit, s.limit_remaining ?? 0)
}

/** A store the gateway runs on for one test file, and how to clean up after it. */
export interface StoreRun {
  env: Record<string, string>
  stop(): Promise<void>
}
export const STORES: ReadonlyArray<{ name: string; open(): Promise<StoreRun> }> = [
  { name: 'in-process store', open: async () => ({ env: {}, stop: async () => {} }) },
  { name: 'shared memory, 2 workers', open: async () => ({ env: { FAIRVISOR_WORKERS: '2' }, stop: async () => {} }) },
  {
    // A Redis of its own: counters start empty, whatever ran before in the same window.
    name: 'Redis',
    async open() {
      const redis = await startRedis()
      return { env: { FAIRVISOR_STORE: redis.url, FAIRVISOR_STORE_TIMEOUT_MS: '2000' }, stop: () => redis.stop() }
    },
  },
  {
    name: 'PostgreSQL',
    async open() {
      const prefix = uniquePrefix('rls')
      return {
        env: { FAIRVISOR_STORE: PG_URL, FAIRVISOR_PG_TABLE_PREFIX: prefix, FAIRVISOR_STORE_TIMEOUT_MS: '2000' },
        stop: () => dropPrefix(prefix),
      }
    },
  },
]

/** The gateway of one store, serving `dir` as FAIRVISOR_RLS_CONFIG. */
export class RlsGateway {
  private constructor(
    readonly gw: GatewayProcess,
    readonly c: GrpcClients,
    readonly dir: string,
  ) {}

  static async start(env: Record<string, string>, files: Record<string, string>): Promise<RlsGateway> {
    const dir = mkdtempSync(join(tmpdir(), 'fv-rls-upstream-'))
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
    const gw = await startGateway(
      { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_GRPC_PORT: '0', FAIRVISOR_RLS_CONFIG: dir, ...env },
      { timeoutMs: 60_000 },
    )
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    return new RlsGateway(gw, grpcClients(line.grpcPort as number), dir)
  }

  /** ShouldRateLimit; `hits` is the request's hits_addend. */
  async ask(domain: string, descriptors: Descriptor[], hits?: number): Promise<Answer> {
    const t0 = Date.now()
    const r = (await this.c.shouldRateLimit({
      domain,
      descriptors: descriptors.map((x) => ({
        entries: x.entries.map(([key, value]) => ({ key, value })),
        ...(x.hits === undefined ? {} : { hits_addend: { value: x.hits } }),
      })),
      ...(hits === undefined ? {} : { hits_addend: hits }),
    })) as { overall_code?: number; statuses?: WireStatus[]; response_headers_to_add?: Array<{ key: string; value: string }> }
    const t1 = Date.now()
    const wire = r.statuses ?? []
    return {
      overall: r.overall_code ?? 0,
      statuses: wire.map(status),
      resets: wire.map((s) => (s.duration_until_reset ? Number(s.duration_until_reset.seconds ?? 0) : undefined)),
      headers: Object.fromEntries((r.response_headers_to_add ?? []).map((h) => [h.key, h.value])),
      at: [t0, t1],
    }
  }

  /**
   * Writes (text) or removes (undefined) files of the configuration directory; resolves with the
   * log line of the reload that follows: `rls config loaded` or `rls config rejected…`.
   */
  async change(files: Record<string, string | undefined>): Promise<LogLine> {
    const from = this.gw.logs.length
    for (const [name, text] of Object.entries(files)) {
      if (text === undefined) rmSync(join(this.dir, name), { force: true })
      else writeFileSync(join(this.dir, name), text)
    }
    return this.gw.waitForLog(
      (l) =>
        this.gw.logs.indexOf(l) >= from &&
        (l.msg === 'rls config loaded' || (typeof l.msg === 'string' && l.msg.startsWith('rls config rejected'))),
    )
  }

  /**
   * Asks with a check that charges nothing (hits_addend 0) until `ready` holds of the answer's
   * first status: with worker threads a configuration reaches the worker a moment after the
   * supervisor logged it.
   */
  async until(domain: string, entries: Entries, ready: (s: Status) => boolean): Promise<void> {
    const deadline = Date.now() + 15_000
    for (;;) {
      const s = (await this.ask(domain, [d(entries, 0)]).catch(() => undefined))?.statuses[0]
      if (s !== undefined && ready(s)) return
      assert.ok(Date.now() < deadline, `${domain} ${JSON.stringify(entries)}: the new configuration never answered`)
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  async stop(): Promise<void> {
    this.c.close()
    await this.gw.stop()
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * `body`'s tests once per store, each store on a gateway of its own started before them with
 * `files` as its configuration directory (and `env`).
 */
export function onStores(
  title: string,
  o: { files(): Record<string, string>; env?: Record<string, string> },
  body: (g: () => RlsGateway, store: string) => void,
): void {
  for (const store of STORES)
    describe(`${title} (${store.name})`, () => {
      let run: StoreRun | undefined
      let gateway: RlsGateway | undefined
      before(async () => {
        run = await store.open()
        gateway = await RlsGateway.start({ ...run.env, ...o.env }, o.files())
      })
      after(async () => {
        await gateway?.stop()
        await run?.stop()
      })
      body(() => gateway!, store.name)
    })
}

/** Upstream's fixture files (paths under test/fixtures/rls/upstream), by their base name. */
export function fixtures(...paths: string[]): Record<string, string> {
  return Object.fromEntries(paths.map((p) => [basename(p), readFileSync(join(UPSTREAM, p), 'utf8')]))
}

/** A file's text with its `domain:` renamed, so several of upstream's files (all `test-domain`) load side by side. */
export const renamed = (text: string, domain: string): string => text.replace(/^domain: .*$/m, `domain: ${domain}`)

/**
 * Runs `sequence` (attempt 0, then 1, …) and retries it only when it failed while the clock crossed
 * a boundary of `unitS`-second windows: its calls then did not all fall in one window, which
 * upstream's tests (a mocked clock) never meet. Each attempt must use counters of its own (values
 * or a domain named after `attempt`). A failure inside one window fails.
 */
export async function inOneWindow(unitS: number, sequence: (attempt: number) => Promise<void>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const window = Math.floor(Date.now() / 1000 / unitS)
    try {
      await sequence(attempt)
      return
    } catch (err) {
      if (Math.floor(Date.now() / 1000 / unitS) === window || attempt >= 5) throw err
    }
  }
}

/**
 * duration_until_reset as envoyproxy/ratelimit computes it (`unit − now % unit`, windows aligned
 * on the epoch) for a call answered between `at[0]` and `at[1]`: the seconds left in its window.
 */
export function assertReset(reset: number | undefined, unitS: number, at: [number, number], what = 'duration_until_reset'): void {
  const left = (ms: number): number => unitS - (Math.floor(ms / 1000) % unitS)
  const [early, late] = [left(at[0]), left(at[1])]
  // Within one window the value counts down from the call's start to its answer; across a boundary, any.
  const [lo, hi] = late <= early ? [late, early] : [1, unitS]
  assert.ok(reset !== undefined && reset >= lo && reset <= hi, `${what}: ${reset}, expected ${lo}..${hi} (unit ${unitS} s)`)
}

/** A value no other run or attempt uses (for descriptors whose configured key takes any value). */
export const fresh = (label: string): string =>
  `${label}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
