/**
 * Bounded work per ShouldRateLimit call, through the real gateway on the
 * in-process store and on Redis (a server of this test's own, so a long
 * script stalls nobody else). A call of 100,000 descriptors (2.9 MB, under
 * the 4 MiB message cap) is refused with RESOURCE_EXHAUSTED naming
 * FAIRVISOR_RLS_MAX_DESCRIPTORS before it is decoded, in milliseconds, while
 * /livez keeps answering (it took 55 s and blocked the process; on Redis a
 * 40,000-descriptor script ran 19 s and every other client got BUSY). With the
 * cap raised, a 40,000-descriptor call is decided exactly, in time linear
 * in its descriptors (against a 4,000-descriptor call on the same machine).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { status as Code } from '@grpc/grpc-js'
import { method } from '../../src/grpc/protos.js'
import { grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { cpuMs, metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

const RLS = method('envoy.service.ratelimit.v3.RateLimitService', 'ShouldRateLimit')
const LIMIT = 1_000_000
const OK = 1
/**
 * The gateway's CPU for one refusal, at most (each one under 1 s of the clock too): about 10 ms,
 * where decoding the call would take a second. CPU time, not the clock, so a busy machine that
 * delays the call does not fail the test; a refusal that decoded the message would.
 */
const REFUSE_CPU_MS = 50
/**
 * Linear, measured against the machine's own speed rather than the clock: the faster of two
 * 40,000-descriptor calls takes at most this many times the faster of two 4,000-descriptor calls
 * (linear: about 10, less with the fixed cost of a call; the quadratic steps made it about 100:
 * 4–6 s in process and 19 s on Redis against tens of milliseconds). A busy machine slows both
 * sizes alike, so the bound holds there too.
 */
const LINEAR_RATIO = 30
/** Whatever the load, a 40,000-descriptor call that takes this long is not linear (0.2–0.5 s on a quiet 2-core machine). */
const LINEAR_MS = 15_000

let run = 0
/** A request of `n` descriptors, each on a counter of its own, encoded as Envoy sends it. */
function request(n: number): Buffer {
  const tag = `${process.pid}-${Date.now().toString(36)}-${run++}`
  return RLS.encodeRequest({
    domain: 'bounds',
    descriptors: Array.from({ length: n }, (_, i) => ({ entries: [{ key: 'client', value: `${tag}-${i}` }] })),
  })
}

interface Answer {
  ms: number
  res?: { overall_code: number; statuses: Array<{ code: number; limit_remaining: number }> }
  err?: Error & { code?: number; details?: string }
}

/** One call of pre-encoded bytes (the client's own encoding is not the gateway's time). */
async function call(c: GrpcClients, bytes: Buffer): Promise<Answer> {
  const t0 = performance.now()
  try {
    const raw = (await c.raw(RLS.path, bytes)) as Buffer
    return { ms: performance.now() - t0, res: RLS.decodeResponse(raw) as Answer['res'] }
  } catch (err) {
    return { ms: performance.now() - t0, err: err as Answer['err'] }
  }
}

/** `work` while /livez is asked again and again (from before it starts to after it ends): every answer and the slowest. */
async function withLivez<T>(gw: GatewayProcess, work: () => Promise<T>): Promise<{ result: T; statuses: number[]; worstMs: number }> {
  const statuses: number[] = []
  let worstMs = 0
  let done = false
  const ask = async (): Promise<void> => {
    const t0 = performance.now()
    const r = await fetch(`${gw.url}/livez`)
    await r.arrayBuffer()
    statuses.push(r.status)
    worstMs = Math.max(worstMs, performance.now() - t0)
  }
  await ask()
  // Paced, so the asking does not take the CPU the call needs on a loaded machine.
  const poll = (async () => {
    while (!done) {
      await ask()
      await new Promise((r) => setTimeout(r, 5))
    }
  })()
  const result = await work()
  done = true
  await poll
  await ask()
  return { result, statuses, worstMs }
}

function rlsConfig(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fv-rls-bounds-'))
  writeFileSync(
    join(dir, 'config.yaml'),
    `domain: bounds\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: ${LIMIT}}\n`,
  )
  return dir
}

async function start(env: Record<string, string>): Promise<{ gw: GatewayProcess; c: GrpcClients }> {
  const gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_GRPC_PORT: '0', FAIRVISOR_RLS_CONFIG: rlsConfig(), ...env })
  const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
  return { gw, c: grpcClients(line.grpcPort as number) }
}

/** 100,000 descriptors refused three times, fast, /livez answering meanwhile; the refusals counted. */
async function refusesHugeCalls(gw: GatewayProcess, c: GrpcClients, cap: number): Promise<string> {
  const bytes = request(100_000)
  assert.ok(bytes.length > 2_500_000 && bytes.length < 4 * 1024 * 1024, `${bytes.length} bytes`)
  const before = (await metricValue(gw, 'fairvisor_rls_too_many_descriptors_total')) ?? 0
  const cpu0 = cpuMs(gw.proc.pid)
  const { result, statuses, worstMs } = await withLivez(gw, async () => [await call(c, bytes), await call(c, bytes), await call(c, bytes)])
  const cpu = cpuMs(gw.proc.pid) - cpu0
  for (const a of result) {
    assert.equal(a.err?.code, Code.RESOURCE_EXHAUSTED, `answered ${a.err?.message ?? 'OK'}`)
    assert.equal(a.err?.details, `more than ${cap} descriptors in one ShouldRateLimit call (FAIRVISOR_RLS_MAX_DESCRIPTORS)`)
    assert.ok(a.ms < 1000, `a refusal took ${a.ms.toFixed(0)} ms`)
  }
  // With the /livez calls made meanwhile: those cost the gateway well under a millisecond each.
  assert.ok(
    cpu / 3 < REFUSE_CPU_MS,
    `three refusals took ${cpu} ms of the gateway's CPU (${result.map((a) => a.ms.toFixed(0)).join(', ')} ms)`,
  )
  assert.ok(statuses.length >= 2 && statuses.every((s) => s === 200), `/livez answered ${statuses.join(',')}`)
  assert.ok(worstMs < 1000, `/livez took up to ${worstMs.toFixed(0)} ms meanwhile`)
  assert.equal(await metricValue(gw, 'fairvisor_rls_too_many_descriptors_total'), before + 3)
  return `refused in ${result.map((a) => a.ms.toFixed(0)).join(', ')} ms (${cpu} ms of the gateway's CPU for the three); /livez ${statuses.length} times, up to ${worstMs.toFixed(0)} ms`
}

/** `n` descriptors decided exactly (each counter charged once), twice: the faster call's milliseconds. */
async function fasterOfTwo(gw: GatewayProcess, c: GrpcClients, n: number): Promise<number[]> {
  const ms: number[] = []
  for (let round = 0; round < 2; round++) {
    const a = await call(c, request(n))
    assert.equal(a.err, undefined, a.err?.message)
    assert.equal(a.res!.overall_code, OK)
    assert.equal(a.res!.statuses.length, n)
    assert.ok(
      a.res!.statuses.every((s) => s.code === OK && s.limit_remaining === LIMIT - 1),
      'every descriptor counted once, by the store',
    )
    ms.push(a.ms)
  }
  assert.equal(await metricValue(gw, 'fairvisor_rls_decisions_total', 'code="store_'), undefined, 'the store answered')
  return ms
}

/** 40,000 descriptors against 4,000: ten times the work in at most LINEAR_RATIO times the time. */
async function decidesLongCallsInLinearTime(gw: GatewayProcess, c: GrpcClients): Promise<string> {
  const small = await fasterOfTwo(gw, c, 4_000)
  const large = await fasterOfTwo(gw, c, 40_000)
  const [s, l] = [Math.min(...small), Math.min(...large)]
  const said = `4,000 descriptors in ${small.map((x) => x.toFixed(0)).join(' and ')} ms, 40,000 in ${large.map((x) => x.toFixed(0)).join(' and ')} ms`
  assert.ok(l < LINEAR_RATIO * Math.max(s, 1), `not linear: ${said}`)
  assert.ok(l < LINEAR_MS, said)
  return said
}

describe('ShouldRateLimit work per call, in-process store', () => {
  let gw: GatewayProcess
  let c: GrpcClients
  before(async () => {
    ;({ gw, c } = await start({}))
  })
  after(async () => {
    c?.close()
    await gw?.stop()
  })

  test('100,000 descriptors: RESOURCE_EXHAUSTED naming the setting in milliseconds, /livez answering', { timeout: 300_000 }, async (t) => {
    t.diagnostic(`in-process: ${await refusesHugeCalls(gw, c, 256)}`)
  })

  test('the default cap is 256: 256 descriptors decided, 257 refused', async () => {
    const ok = await call(c, request(256))
    assert.equal(ok.err, undefined, ok.err?.message)
    assert.equal(ok.res!.statuses.length, 256)
    assert.equal(ok.res!.statuses[255]!.limit_remaining, LIMIT - 1)
    assert.equal((await call(c, request(257))).err?.code, Code.RESOURCE_EXHAUSTED)
  })

  describe('cap raised (FAIRVISOR_RLS_MAX_DESCRIPTORS=50000)', () => {
    let raised: { gw: GatewayProcess; c: GrpcClients }
    before(async () => (raised = await start({ FAIRVISOR_RLS_MAX_DESCRIPTORS: '50000' })))
    after(async () => {
      raised?.c.close()
      await raised?.gw.stop()
    })

    test(`40,000 descriptors decided exactly, in at most ${LINEAR_RATIO} times the time of 4,000`, { timeout: 300_000 }, async (t) => {
      t.diagnostic(`in-process: ${await decidesLongCallsInLinearTime(raised.gw, raised.c)}`)
    })
  })
})

describe('ShouldRateLimit work per call, Redis store', () => {
  let redis: RedisServer
  let gw: GatewayProcess
  let c: GrpcClients
  before(async () => {
    redis = await startRedis()
    // A deadline long enough for the whole script: a store that timed out would answer by the fail policy, not decide.
    ;({ gw, c } = await start({ FAIRVISOR_STORE: redis.url, FAIRVISOR_STORE_TIMEOUT_MS: '10000', FAIRVISOR_RLS_MAX_DESCRIPTORS: '50000' }))
  })
  after(async () => {
    c?.close()
    await gw?.stop()
    await redis?.stop()
  })

  test('100,000 descriptors: RESOURCE_EXHAUSTED in milliseconds, /livez answering, Redis untouched', { timeout: 300_000 }, async (t) => {
    t.diagnostic(`redis: ${await refusesHugeCalls(gw, c, 50_000)}`)
    assert.doesNotMatch(redis.cli('info', 'commandstats'), /cmdstat_eval/, 'no script ran for a refused call')
  })

  test(`40,000 descriptors decided exactly in at most ${LINEAR_RATIO} times the time of 4,000; Redis's own CPU too`, {
    timeout: 300_000,
  }, async (t) => {
    /**
     * The Redis server's CPU time so far (INFO cpu, µs): the script's cost whatever else runs on the machine (a
     * busy machine stretches a long script's wall time far more than a short one's).
     */
    const redisCpuUs = (): number => {
      const info = redis.cli('info', 'cpu')
      const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)![1])
      return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6
    }
    const cpu0 = redisCpuUs()
    const small = Math.min(...(await fasterOfTwo(gw, c, 4_000)))
    const cpu1 = redisCpuUs()
    const smallUs = (cpu1 - cpu0) / 2
    const large = Math.min(...(await fasterOfTwo(gw, c, 40_000)))
    const largeUs = (redisCpuUs() - cpu1) / 2
    t.diagnostic(
      `redis: calls of 4,000 and 40,000 descriptors in ${small.toFixed(0)} and ${large.toFixed(0)} ms, Redis's CPU ${(smallUs / 1000).toFixed(0)} and ${(largeUs / 1000).toFixed(0)} ms a call`,
    )
    assert.ok(large < LINEAR_RATIO * Math.max(small, 1) && large < LINEAR_MS, `not linear: ${small} ms for 4,000, ${large} ms for 40,000`)
    // Linear inside Redis too, on its own CPU time (the quadratic script ran 19 s).
    assert.ok(
      largeUs < LINEAR_RATIO * Math.max(smallUs, 1000),
      `Redis's CPU: ${smallUs.toFixed(0)} µs a call for 4,000, ${largeUs.toFixed(0)} µs for 40,000`,
    )
  })
})
