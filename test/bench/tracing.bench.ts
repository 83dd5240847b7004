/**
 * What traces cost: one gateway thread of this build with tracing off against the same build with
 * tracing on, side by side in one run (docs/benchmarks.md, "Traces"):
 *
 *   - on, all sampled:  OTEL_TRACES_SAMPLER=always_on, every request's spans exported;
 *   - on, none sampled: parentbased_traceidratio at 0, spans started and dropped (what a request
 *                       outside a low sampling ratio costs).
 *
 * Scenarios as single-thread.bench.ts (test/bench/lib.ts allowRejectBundle, memory store): decision
 * allow (POST /v1/decision → 200; spans: server, decision) and proxied allow (GET through the proxy
 * → 200; spans: server, decision, upstream). Spans go to an OTLP/HTTP sink process that answers
 * every export and keeps nothing. Every gateway is pinned to CPU 0; wrk, the backend and the sink
 * to the others. The verdict is measured as single-thread.bench.ts does: a traced and an untraced
 * gateway under load at the same time on CPU 0, each given half of it by the scheduler, so the
 * ratio of their throughputs is the inverse ratio of their CPU per request; the median of the rounds.
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/tracing.bench.ts [seconds=5] [rounds=5] [connections=32]
 *
 * With FV_BASELINE_DIR (a built checkout of another commit, as single-thread.bench.ts takes it), it
 * measures instead what traces cost while OFF: this build against that one, traces off in both. Two
 * processes of the same code measure several per cent apart in one pair (where each lands in memory,
 * which starts first), so that is measured over `pairs` pairs of fresh processes, which one starts
 * first alternating, each pair's ratio the median of its rounds; the verdict is the median of the pairs.
 *
 *   flock /tmp/fv-heavy.lock env FV_BASELINE_DIR=<checkout> node --import tsx test/bench/tracing.bench.ts 3 3 32 [pairs=8]
 */
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import {
  allowRejectBundle,
  CLI,
  cpuMicros,
  median,
  pinCpus,
  runLoad,
  spawnServer,
  startBackendProcess,
  startGatewayProcess,
  stopAll,
  tempDir,
  type LoadResult,
  type Running,
} from './lib.js'

const SECONDS = Number(process.argv[2] ?? 5)
const ROUNDS = Number(process.argv[3] ?? 5)
const CONNECTIONS = Number(process.argv[4] ?? 32)
const PAIRS = Number(process.argv[5] ?? 8)
const BASELINE = process.env.FV_BASELINE_DIR

type Scenario = 'decision allow' | 'proxied allow'
type Mode = 'off' | 'on, none sampled' | 'on, all sampled'
const SCENARIOS: readonly Scenario[] = ['decision allow', 'proxied allow']
const TRACED: readonly Mode[] = ['on, none sampled', 'on, all sampled']

/** An OTLP/HTTP receiver that answers every export with an empty ExportTraceServiceResponse and keeps nothing. */
function startSink(): Promise<Running> {
  const code = `let spans = 0
require('http').createServer((q, s) => { q.on('data', () => {}); q.on('end', () => { spans++; s.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 }); s.end() }) })
  .listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`
  return spawnServer('otlp sink', process.execPath, ['-e', code])
}

function envOf(mode: Mode, sink: string): Record<string, string> {
  if (mode === 'off') return {}
  const sampler: Record<string, string> =
    mode === 'on, all sampled'
      ? { OTEL_TRACES_SAMPLER: 'always_on' }
      : { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }
  return { FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: sink, ...sampler }
}

function load(scenario: Scenario, gw: Running, seconds: number): Promise<LoadResult> {
  if (scenario === 'proxied allow')
    return runLoad({ url: `${gw.url}/allow/items`, connections: CONNECTIONS, seconds, headers: { 'x-user': 'bench-user' } })
  return runLoad({
    url: `${gw.url}/v1/decision`,
    connections: CONNECTIONS,
    seconds,
    method: 'POST',
    headers: { 'x-original-uri': '/allow/items', 'x-original-method': 'GET', 'x-user': 'bench-user' },
  })
}

/**
 * Every answer a 2xx, so a wrong setup cannot pass silently. A few socket errors are let through (at most
 * one request in a thousand, counted): on a loaded two-core machine, two gateways sharing one CPU under
 * 32 connections each leave an odd request past wrk's 2 s timeout.
 */
function check(name: string, gw: Running, r: LoadResult): void {
  if (gw.proc.exitCode !== null || gw.proc.signalCode !== null) throw new Error(`${name}: the gateway exited`)
  if (r.non2xx !== 0 || r.errors > r.requests / 1000) throw new Error(`${name}: ${r.errors} socket errors, ${r.non2xx} non-2xx answers`)
  if (r.errors !== 0) console.error(`${name}: ${r.errors} socket errors of ${r.requests} requests (wrk timeouts on a loaded machine)`)
}

/** Traces off in both: this build against `baselineCli`, over PAIRS pairs of fresh processes (see the header). */
async function offAgainstBaseline(baselineCli: string, cpus: ReturnType<typeof pinCpus>): Promise<void> {
  const backend = await startBackendProcess()
  const bundle = allowRejectBundle(tempDir('fv-bench-tracing-off-'))
  const pairs = new Map<Scenario, number[]>(SCENARIOS.map((s) => [s, []]))
  for (let pair = 0; pair < PAIRS; pair++)
    for (const scenario of SCENARIOS) {
      const env = {
        FAIRVISOR_CONFIG_FILE: bundle,
        ...(scenario === 'proxied allow' ? { FAIRVISOR_BACKEND_URL: backend.url } : { FAIRVISOR_MODE: 'decision_service' }),
      }
      const first = pair % 2 === 0 ? CLI : baselineCli
      const a = await startGatewayProcess(env, [], cpus?.gateway, first)
      const b = await startGatewayProcess(env, [], cpus?.gateway, first === CLI ? baselineCli : CLI)
      const [current, baseline] = first === CLI ? [a, b] : [b, a]
      await Promise.all([load(scenario, current, 1), load(scenario, baseline, 1)]) // warm-up: JIT, connection pools
      const ratios: number[] = []
      for (let round = 0; round < ROUNDS; round++) {
        const [rc, rb] = await Promise.all([load(scenario, current, SECONDS), load(scenario, baseline, SECONDS)])
        check(`current ${scenario}`, current, rc)
        check(`baseline ${scenario}`, baseline, rb)
        ratios.push(rc.rps / rb.rps)
      }
      pairs.get(scenario)!.push(median(ratios))
      await Promise.all([current.stop(), baseline.stop()])
    }
  console.log(
    `\n${PAIRS} pairs of processes × ${ROUNDS} rounds × ${SECONDS} s, wrk -c${CONNECTIONS}, node ${process.version}; traces off; ` +
      `both gateways of a pair at the same time on CPU ${cpus?.gateway ?? '(unpinned)'}; baseline ${BASELINE}\n`,
  )
  for (const [scenario, rs] of pairs)
    console.log(
      `${`current / baseline, ${scenario}`.padEnd(36)} = ${median(rs).toFixed(3)} (median of pairs; mean ${(rs.reduce((x, y) => x + y, 0) / rs.length).toFixed(3)}; ` +
        `per pair, current first on the even ones: ${rs.map((r) => r.toFixed(3)).join(', ')})`,
    )
}

async function main(): Promise<void> {
  const cpus = pinCpus()
  if (BASELINE !== undefined) {
    const baselineCli = join(resolve(BASELINE), 'dist/cli.js')
    if (!existsSync(baselineCli)) throw new Error(`${baselineCli} is missing: build that checkout first`)
    try {
      return await offAgainstBaseline(baselineCli, cpus)
    } finally {
      await stopAll()
    }
  }
  if (cpus === undefined) console.error('taskset or a second CPU is missing: nothing pinned')
  try {
    const [backend, sink] = await Promise.all([startBackendProcess(), startSink()])
    const bundle = allowRejectBundle(tempDir('fv-bench-tracing-'))
    const gateways = new Map<string, Running>()
    for (const mode of ['off', ...TRACED] as const)
      for (const scenario of SCENARIOS) {
        const front: Record<string, string> =
          scenario === 'proxied allow' ? { FAIRVISOR_BACKEND_URL: backend.url } : { FAIRVISOR_MODE: 'decision_service' }
        gateways.set(
          `${mode} ${scenario}`,
          await startGatewayProcess({ ...front, FAIRVISOR_CONFIG_FILE: bundle, ...envOf(mode, sink.url) }, [], cpus?.gateway),
        )
      }
    for (const [name, gw] of gateways)
      check(name, gw, await load(name.endsWith('proxied allow') ? 'proxied allow' : 'decision allow', gw, 1))
    const results = new Map<string, { ratio: number; cpu: number; rps: [number, number] }[]>()
    for (let round = 0; round < ROUNDS; round++)
      for (const scenario of SCENARIOS)
        for (const mode of TRACED) {
          const on = gateways.get(`${mode} ${scenario}`)!
          const off = gateways.get(`off ${scenario}`)!
          const before = [cpuMicros(on.proc.pid), cpuMicros(off.proc.pid)]
          const [ron, roff] = await Promise.all([load(scenario, on, SECONDS), load(scenario, off, SECONDS)])
          check(`${mode} ${scenario}`, on, ron)
          check(`off ${scenario}`, off, roff)
          const after = [cpuMicros(on.proc.pid), cpuMicros(off.proc.pid)]
          const perReq = (i: number, n: number): number => ((after[i] ?? 0) - (before[i] ?? 0)) / n
          const key = `${mode}, ${scenario}`
          if (!results.has(key)) results.set(key, [])
          results.get(key)!.push({
            ratio: ron.rps / roff.rps,
            cpu: perReq(0, ron.requests) / perReq(1, roff.requests),
            rps: [ron.rps, roff.rps],
          })
        }
    console.log(
      `\n${ROUNDS} rounds × ${SECONDS} s, wrk -c${CONNECTIONS}, node ${process.version}; gateways on CPU ${cpus?.gateway ?? '(unpinned)'}, ` +
        `wrk, backend and OTLP sink on CPU ${cpus?.rest ?? '(unpinned)'}; a traced and an untraced gateway at the same time on CPU 0\n`,
    )
    for (const [key, rs] of results) {
      const ratio = median(rs.map((r) => r.ratio))
      console.log(
        `${`traced / untraced, ${key}`.padEnd(48)} = ${ratio.toFixed(3)} (cost ${((1 / ratio - 1) * 100).toFixed(1)} % CPU per request; ` +
          `CPU per request ${median(rs.map((r) => r.cpu)).toFixed(3)}×; per round ${rs.map((r) => r.ratio.toFixed(3)).join(', ')}; ` +
          `requests/s traced ${Math.round(median(rs.map((r) => r.rps[0])))}, untraced ${Math.round(median(rs.map((r) => r.rps[1])))})`,
      )
    }
  } finally {
    await stopAll()
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
