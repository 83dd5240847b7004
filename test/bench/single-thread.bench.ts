/**
 * One gateway thread against another build of the gateway (round 1,
 * b321477, by default the reference), side by side in one run:
 *
 *   - decision allow:  POST /v1/decision for a request a token bucket that never runs dry allows (200);
 *   - decision reject: POST /v1/decision for a request a one-token bucket rejects (429);
 *   - proxied allow:   the allowed request through the reverse proxy to a small backend (200);
 *   - proxied reject:  a request the reverse proxy rejects (429, the backend not called).
 *
 * Next to them, pinned to the same CPU and run in the same rounds, the references
 * (not in the at-once verdict): nginx `proxy_pass` (one worker, upstream keep-alive)
 * for the proxied allow, nginx `return 200` (one worker) for every other scenario,
 * and for both rejects the ceiling of any reject on node:http, a server that
 * answers a constant 429 with the gateway's own reject headers and body.
 *
 * Both builds get the same bundle (test/bench/lib.ts allowRejectBundle: one
 * token_bucket rule keyed on X-User per policy) and the same settings, one
 * thread each (FAIRVISOR_WORKERS=1 here; round 1 had no workers). Every
 * gateway is pinned to CPU 0 with taskset; wrk (one thread), the backend and
 * this process to the other CPUs, so each ratio compares the code and not
 * where the scheduler put the processes. In each round the two builds of a
 * scenario run back to back (which goes first flips every round, the scenario
 * order rotates); then, for the verdict, the two builds of a scenario run under
 * load at the same time on CPU 0: the scheduler gives each half of it, so their
 * throughput ratio is the inverse of their CPU per request, and a swing of the
 * virtual machine's speed falls on both sides of the ratio at once (per-round
 * spread ±4 % here, where adjacent runs spread ±50 %). Each ratio is the median
 * of the per-round ratios. CPU per
 * request is the gateway's user + system time (/proc/<pid>/stat) over the
 * requests of a run.
 *
 *   git worktree add /work/wt/b321477 b321477 && (cd /work/wt/b321477 && npm ci)   # npm ci builds dist/
 *   flock /tmp/fv-heavy.lock env FV_BASELINE_DIR=/work/wt/b321477 \
 *     node --import tsx test/bench/single-thread.bench.ts [seconds=5] [rounds=5] [connections=32]
 *
 * FV_BENCH_PROFILE=<dir> runs every gateway under `node --cpu-prof` and prints their hottest functions.
 * FV_BENCH_SCENARIOS=<names, comma-separated> runs only those scenarios (e.g. 'proxied allow').
 */
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { hotSpots } from './cpu-profile.js'
import {
  allowRejectBundle,
  CLI,
  haveCommand,
  cpuMicros,
  median,
  pairedRatio,
  pinCpus,
  runLoad,
  startNginx,
  startNginxProxy,
  spawnServer,
  startBackendProcess,
  stopAll,
  summarise,
  table,
  tempDir,
  type LoadResult,
  type Running,
} from './lib.js'

const SECONDS = Number(process.argv[2] ?? 5)
const ROUNDS = Number(process.argv[3] ?? 5)
const CONNECTIONS = Number(process.argv[4] ?? 32)
const BASELINE = process.env.FV_BASELINE_DIR
const PROFILE_DIR = process.env.FV_BENCH_PROFILE
const dir = tempDir('fv-bench-single-')

type Scenario = 'decision allow' | 'decision reject' | 'proxied allow' | 'proxied reject'
const ALL_SCENARIOS: readonly Scenario[] = ['decision allow', 'decision reject', 'proxied allow', 'proxied reject']
/** FV_BENCH_SCENARIOS='proxied allow' (comma-separated) runs only those scenarios. */
const SCENARIOS: readonly Scenario[] = process.env.FV_BENCH_SCENARIOS
  ? ALL_SCENARIOS.filter((s) => process.env.FV_BENCH_SCENARIOS!.split(',').includes(s))
  : ALL_SCENARIOS

interface Target {
  name: string
  build: 'current' | 'baseline' | 'reference'
  scenario: Scenario
  /** A reference's answers: allow (2xx) or reject (429); a gateway's follow from its scenario. */
  expect?: 'allow' | 'reject'
  gateway: Running
}

/** A gateway of `cli` (a built checkout's dist/cli.js), pinned to `cpu`, on a free port. */
function gateway(cli: string, label: string, env: Record<string, string>, cpu: string | undefined): Promise<Running> {
  const nodeArgs = PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', join(PROFILE_DIR, label)] : []
  const gwEnv = { FAIRVISOR_HOST: '127.0.0.1', FAIRVISOR_PORT: '0', FAIRVISOR_LOG_LEVEL: 'info', FAIRVISOR_WORKERS: '1', ...env }
  // taskset execs node in place: the pid is the gateway's own (stop(), /proc CPU time).
  const argv = [...nodeArgs, cli]
  return cpu === undefined
    ? spawnServer(label, process.execPath, argv, gwEnv)
    : spawnServer(label, 'taskset', ['-c', cpu, process.execPath, ...argv], gwEnv)
}

function load(t: Target, seconds: number): Promise<LoadResult> {
  const path = t.scenario.endsWith('reject') ? '/reject/items' : '/allow/items'
  if (t.scenario.startsWith('proxied'))
    return runLoad({ url: `${t.gateway.url}${path}`, connections: CONNECTIONS, seconds, headers: { 'x-user': 'bench-user' } })
  return runLoad({
    url: `${t.gateway.url}/v1/decision`,
    connections: CONNECTIONS,
    seconds,
    method: 'POST',
    headers: { 'x-original-uri': path, 'x-original-method': 'GET', 'x-user': 'bench-user' },
  })
}

/** Every answer is what the scenario says, so a wrong setup cannot pass silently. */
function check(t: Target, r: LoadResult): void {
  const p = t.gateway.proc
  if (p.exitCode !== null || p.signalCode !== null) throw new Error(`${t.name}: the gateway exited (${p.exitCode ?? p.signalCode})`)
  if (r.errors !== 0) throw new Error(`${t.name}: ${r.errors} socket errors`)
  const reject = (t.expect ?? (t.scenario.endsWith('reject') ? 'reject' : 'allow')) === 'reject'
  if (!reject && r.non2xx !== 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers on an allow path`)
  // The reject bucket holds one token when the gateway starts: every later answer is 429.
  if (reject && r.non2xx < r.requests - 1) throw new Error(`${t.name}: only ${r.non2xx} of ${r.requests} rejected`)
}

async function main(): Promise<void> {
  if (BASELINE === undefined) throw new Error('FV_BASELINE_DIR: the path of the other build (a checkout with dist/ built)')
  const baselineCli = join(resolve(BASELINE), 'dist/cli.js')
  if (!existsSync(baselineCli)) throw new Error(`${baselineCli} is missing: build that checkout first`)
  const cpus = pinCpus() // before anything starts: this process, wrk and the backend leave CPU 0 to the gateways
  if (cpus === undefined) console.error('taskset or a second CPU is missing: nothing pinned')
  const cpuUsed = new Map<string, number[]>()
  try {
    const backend = await startBackendProcess()
    const bundle = allowRejectBundle(dir)
    const targets: Target[] = []
    for (const [build, cli] of [
      ['current', CLI],
      ['baseline', baselineCli],
    ] as const) {
      const decision = await gateway(
        cli,
        `${build}-decision`,
        { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: bundle },
        cpus?.gateway,
      )
      const proxy = await gateway(
        cli,
        `${build}-proxy`,
        { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle },
        cpus?.gateway,
      )
      for (const scenario of SCENARIOS)
        targets.push({ name: `${build} ${scenario}`, build, scenario, gateway: scenario.startsWith('proxied') ? proxy : decision })
    }
    targets.push(...(await references(backend.url, targets.find((t) => t.name === 'current proxied reject')?.gateway, cpus?.gateway)))
    const measured = async (t: Target, seconds: number): Promise<LoadResult> => {
      const before = cpuMicros(t.gateway.proc.pid)
      const r = await load(t, seconds)
      check(t, r)
      const after = cpuMicros(t.gateway.proc.pid)
      if (before !== undefined && after !== undefined) {
        if (!cpuUsed.has(t.name)) cpuUsed.set(t.name, [])
        cpuUsed.get(t.name)!.push((after - before) / r.requests)
      }
      return r
    }
    for (const t of targets) await measured(t, 1) // warm-up: JIT, connection pools
    cpuUsed.clear()
    // Per round, each scenario's two builds run back to back (order flipped every round): on a
    // shared virtual machine whose speed drifts within seconds, a ratio of adjacent runs is the
    // one that compares the code.
    const runs = new Map<string, LoadResult[]>(targets.map((t) => [t.name, []]))
    for (let round = 0; round < ROUNDS; round++)
      for (let i = 0; i < SCENARIOS.length; i++) {
        const s = SCENARIOS[(i + round) % SCENARIOS.length]!
        const group = targets.filter((t) => t.scenario === s)
        for (const t of round % 2 === 0 ? group : group.reverse()) runs.get(t.name)!.push(await measured(t, SECONDS))
      }
    // Then both builds of a scenario under load at the same time, on the same CPU: the scheduler
    // gives each half of it, so the ratio of their throughputs is the inverse ratio of their CPU
    // per request, and a swing of the machine's speed hits both sides of the ratio at once.
    const together = new Map<Scenario, { ratio: number; cpu: number }[]>(SCENARIOS.map((s) => [s, []]))
    for (let round = 0; round < ROUNDS; round++)
      for (const s of SCENARIOS) {
        const [cur, base] = [
          targets.find((t) => t.scenario === s && t.build === 'current')!,
          targets.find((t) => t.scenario === s && t.build === 'baseline')!,
        ]
        const before = [cpuMicros(cur.gateway.proc.pid), cpuMicros(base.gateway.proc.pid)]
        const [rc, rb] = await Promise.all([load(cur, SECONDS), load(base, SECONDS)])
        check(cur, rc)
        check(base, rb)
        const after = [cpuMicros(cur.gateway.proc.pid), cpuMicros(base.gateway.proc.pid)]
        const perReq = (i: number, n: number): number => ((after[i] ?? 0) - (before[i] ?? 0)) / n
        together.get(s)!.push({ ratio: rc.rps / rb.rps, cpu: perReq(0, rc.requests) / perReq(1, rb.requests) })
      }
    const tool = runs.get(targets[0]!.name)![0]!.tool
    console.log(
      `\n${ROUNDS} rounds × ${SECONDS} s per target (the builds of a scenario back to back), ${tool} -c${CONNECTIONS}, 127.0.0.1, node ${process.version}; ` +
        `gateways on CPU ${cpus?.gateway ?? '(unpinned)'}, wrk and backend on CPU ${cpus?.rest ?? '(unpinned)'}; baseline ${BASELINE}\n`,
    )
    const cpuMedian = (name: string): string => {
      const xs = cpuUsed.get(name)
      return xs === undefined ? '?' : xs.sort((a, b) => a - b)[xs.length >> 1]!.toFixed(1)
    }
    console.log(
      table([
        ['target', 'requests/s', 'p99 ms', 'CPU µs/req', 'rounds (requests/s)'],
        ...targets.map((t) => {
          const m = summarise(runs.get(t.name)!)
          const rounds = runs
            .get(t.name)!
            .map((r) => Math.round(r.rps))
            .join(', ')
          return [t.name, String(Math.round(m.rps)), m.p99Ms.toFixed(2), cpuMedian(t.name), rounds]
        }),
      ]),
    )
    console.log('\nOne after the other (adjacent runs):')
    for (const s of SCENARIOS) {
      const r = pairedRatio(runs, `current ${s}`, `baseline ${s}`)
      const cpu = Number(cpuMedian(`current ${s}`)) / Number(cpuMedian(`baseline ${s}`))
      console.log(
        `${`current / baseline, ${s}`.padEnd(36)} = ${r.median.toFixed(3)}  ` +
          `(per round ${r.rounds.map((x) => x.toFixed(3)).join(', ')}; CPU per request ${Number.isFinite(cpu) ? cpu.toFixed(3) : '?'}×)`,
      )
    }
    console.log('\nAgainst the references (adjacent runs, one CPU each; CPU per request is the one that compares):')
    for (const ref of targets.filter((t) => t.build === 'reference'))
      for (const build of ['current', 'baseline']) {
        const name = `${build} ${ref.scenario}`
        const r = pairedRatio(runs, name, ref.name)
        const cpu = Number(cpuMedian(name)) / Number(cpuMedian(ref.name))
        console.log(
          `${`${name} / ${ref.name.replace(` (${ref.scenario})`, '')}`.padEnd(58)} throughput ${r.median.toFixed(3)}, ` +
            `CPU per request ${Number.isFinite(cpu) ? cpu.toFixed(2) : '?'}×`,
        )
      }
    console.log('\nAt the same time on CPU 0 (each build gets half of it; the verdict):')
    let allMet = true
    for (const s of SCENARIOS) {
      const rs = together.get(s)!
      const ratio = median(rs.map((r) => r.ratio))
      allMet &&= ratio >= 1
      console.log(
        `${`current / baseline, ${s}`.padEnd(36)} = ${ratio.toFixed(3)}  (target ≥ 1.0: ${ratio >= 1 ? 'met' : 'MISSED'}; ` +
          `per round ${rs.map((r) => r.ratio.toFixed(3)).join(', ')}; CPU per request ${median(rs.map((r) => r.cpu)).toFixed(3)}×)`,
      )
    }
    process.exitCode = allMet ? 0 : 1
  } finally {
    await stopAll() // the gateways write their CPU profiles on exit
  }
  if (PROFILE_DIR) {
    for (const build of ['current', 'baseline'])
      for (const mode of ['decision', 'proxy']) {
        console.log(`\nhottest functions, ${build} ${mode} gateway, self time:`)
        for (const line of hotSpots(join(PROFILE_DIR, `${build}-${mode}`), 25)) console.log(line)
      }
  }
}

/**
 * The references for the scenarios run, pinned to `cpu` like the gateways: nginx proxy_pass, nginx return 200
 * (one worker each) and node:http's constant 429 with the headers and body `rejecting` (the current
 * proxy, its reject bucket) answers, read off one reject before the rounds.
 */
async function references(backendUrl: string, rejecting: Running | undefined, cpu: string | undefined): Promise<Target[]> {
  const out: Target[] = []
  const nginx = haveCommand('nginx')
  if (!nginx) console.error('nginx is not on PATH: no nginx references')
  const ref = (name: string, scenario: Scenario, gateway: Running, expect: 'allow' | 'reject'): void => {
    if (SCENARIOS.includes(scenario)) out.push({ name: `${name} (${scenario})`, build: 'reference', scenario, expect, gateway })
  }
  if (nginx && SCENARIOS.includes('proxied allow'))
    ref('nginx proxy_pass', 'proxied allow', await startNginxProxy(backendUrl, cpu), 'allow')
  if (nginx && SCENARIOS.some((s) => s !== 'proxied allow')) {
    const ok = await startNginx((port) => `  server { listen 127.0.0.1:${port}; location / { return 200; } }`, 'nginx return 200', cpu)
    for (const s of ['decision allow', 'decision reject', 'proxied reject'] as const) ref('nginx return 200', s, ok, 'allow')
  }
  if (SCENARIOS.some((s) => s.endsWith('reject'))) {
    // The gateway's own reject, as it is sent: one request takes the bucket's only token, the next is a 429.
    let answer: Response | undefined
    for (let i = 0; i < 2 && rejecting !== undefined; i++)
      answer = await fetch(`${rejecting.url}/reject/items`, { headers: { 'x-user': 'bench-user' } })
    const body = answer === undefined ? '{"error":"too_many_requests"}' : await answer.text()
    const headers: Record<string, string> = {}
    for (const [k, v] of answer?.headers ?? []) if (!['date', 'connection', 'keep-alive', 'content-length'].includes(k)) headers[k] = v
    const code = `const b = Buffer.from(${JSON.stringify(body)}); const h = { ...${JSON.stringify(headers)}, 'content-length': b.length };
require('http').createServer((q, s) => { s.writeHead(429, h); s.end(b) }).listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`
    const argv = [process.execPath, '-e', code]
    if (cpu !== undefined) argv.unshift('taskset', '-c', cpu)
    const ceiling = await spawnServer('node:http constant 429', argv[0]!, argv.slice(1))
    for (const s of ['decision reject', 'proxied reject'] as const) ref('node:http constant 429', s, ceiling, 'reject')
  }
  return out
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
