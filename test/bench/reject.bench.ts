/**
 * The reject path against its ceiling, side by side in one run: the gateway
 * answering 429 (a one-token bucket keyed on X-User, run dry) next to a
 * node:http server that answers every request with a constant 429 carrying
 * the very headers and body the gateway sent (read from the gateway at the
 * start, so the ceiling cannot drift from what the gateway answers): the
 * most any reject written by node:http can do.
 *
 *   - proxied reject:  the reverse proxy, GET /reject/items;
 *   - decision reject: the decision service, POST /v1/decision for /reject/items.
 *
 * Every server is pinned to CPU 0 (taskset), wrk (one thread) and this
 * process to the others. Each round runs every target once, order rotated,
 * for the throughput and the server's CPU time (user + system, every thread)
 * per request. The verdict is the ceiling's CPU per request over the
 * gateway's, per round, median over rounds: what each answer costs, which a
 * shared machine's speed swings hardly change, and the throughput ratio of two
 * servers each given a core. Printed beside it: the throughput ratio of the
 * same rounds, and of each gateway and its ceiling under load at the same time
 * on CPU 0 (the scheduler gives each half of it; when wrk cannot keep the
 * cheaper server busy, that ratio leans towards 1).
 * Goal (issue 35): gateway / ceiling ≥ 0.8.
 *
 * FV_BASELINE_DIR=<checkout with dist/ built> adds that build's gateways (an
 * earlier commit) beside this one's; FV_BENCH_PROFILE=<dir> runs the gateways
 * under `node --cpu-prof` and prints their hottest functions.
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/reject.bench.ts [seconds=5] [rounds=5] [connections=32]
 */
import { request } from 'node:http'
import { join, resolve } from 'node:path'
import { hotSpots } from './cpu-profile.js'
import {
  allowRejectBundle,
  CLI,
  cpuMicros,
  median,
  pinCpus,
  runLoad,
  spawnServer,
  startBackendProcess,
  stopAll,
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
const GOAL = 0.8
const dir = tempDir('fv-bench-reject-')

type Scenario = 'proxied reject' | 'decision reject'
const SCENARIOS: readonly Scenario[] = ['proxied reject', 'decision reject']

interface Target {
  name: string
  scenario: Scenario
  server: Running
  kind: 'gateway' | 'ceiling'
}

/** What each scenario's requests carry (the same for the gateway and its ceiling). */
function call(s: Scenario): { path: string; method: string; headers: Record<string, string> } {
  return s === 'proxied reject'
    ? { path: '/reject/items', method: 'GET', headers: { 'x-user': 'bench-user' } }
    : {
        path: '/v1/decision',
        method: 'POST',
        headers: { 'x-original-uri': '/reject/items', 'x-original-method': 'GET', 'x-user': 'bench-user' },
      }
}

function load(t: Target, seconds: number): Promise<LoadResult> {
  const c = call(t.scenario)
  return runLoad({ url: `${t.server.url}${c.path}`, connections: CONNECTIONS, seconds, method: c.method, headers: c.headers })
}

/** One answer: status, raw headers as sent (flat), body. */
function fetchRaw(url: string, s: Scenario): Promise<{ status: number; headers: string[]; body: string }> {
  const c = call(s)
  return new Promise((resolveAnswer, reject) => {
    const req = request(`${url}${c.path}`, { method: c.method, headers: c.headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolveAnswer({ status: res.statusCode!, headers: res.rawHeaders, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

/** What node:http adds to every answer by itself: the ceiling's server adds them too. */
const ADDED_BY_NODE = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding'])

/** The gateway's 429 for scenario `s` (the bucket's one token spent first): its headers (less node's own) and body. */
async function rejectOf(gw: Running, s: Scenario): Promise<{ headers: string[]; body: string; keepAliveS: number }> {
  for (let i = 0; i < 3; i++) {
    const r = await fetchRaw(gw.url, s)
    if (r.status !== 429) continue
    const headers: string[] = []
    let keepAliveS = 5
    for (let j = 0; j < r.headers.length; j += 2) {
      const [name, value] = [r.headers[j]!, r.headers[j + 1]!]
      if (name.toLowerCase() === 'keep-alive') keepAliveS = Number(/timeout=(\d+)/.exec(value)?.[1] ?? 5)
      if (!ADDED_BY_NODE.has(name.toLowerCase())) headers.push(name, value)
    }
    return { headers, body: r.body, keepAliveS }
  }
  throw new Error(`${gw.name}: no 429 for ${s}`)
}

/** A node:http server answering every request with this constant 429, as the gateway's listener is set up (no delay, keep-alive). */
function ceiling(name: string, reject: { headers: string[]; body: string; keepAliveS: number }, cpu: string | undefined): Promise<Running> {
  const code = `const h = JSON.parse(process.env.HEADERS); const b = Buffer.from(process.env.BODY)
require('http').createServer({ noDelay: true, keepAliveTimeout: ${reject.keepAliveS * 1000} }, (q, s) => { s.writeHead(429, h); s.end(b) })
  .listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`
  const env = { HEADERS: JSON.stringify(reject.headers), BODY: reject.body }
  const args = [process.execPath, '-e', code]
  return cpu === undefined ? spawnServer(name, args[0]!, args.slice(1), env) : spawnServer(name, 'taskset', ['-c', cpu, ...args], env)
}

function gateway(cli: string, label: string, env: Record<string, string>, cpu: string | undefined): Promise<Running> {
  const nodeArgs = PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', join(PROFILE_DIR, label)] : []
  const gwEnv = { FAIRVISOR_HOST: '127.0.0.1', FAIRVISOR_PORT: '0', FAIRVISOR_LOG_LEVEL: 'info', FAIRVISOR_WORKERS: '1', ...env }
  const argv = [process.execPath, ...nodeArgs, cli]
  return cpu === undefined ? spawnServer(label, argv[0]!, argv.slice(1), gwEnv) : spawnServer(label, 'taskset', ['-c', cpu, ...argv], gwEnv)
}

/** Every answer a 429 (the reject bucket's one token is spent before the runs), so a wrong setup cannot pass. */
function check(t: Target, r: LoadResult): void {
  if (r.errors !== 0) throw new Error(`${t.name}: ${r.errors} socket errors`)
  if (r.non2xx < r.requests - 1) throw new Error(`${t.name}: only ${r.non2xx} of ${r.requests} rejected`)
}

async function main(): Promise<void> {
  const cpus = pinCpus()
  if (cpus === undefined) console.error('taskset or a second CPU is missing: nothing pinned')
  const cpu = cpus?.gateway
  const cpuPerRequest = new Map<string, number[]>()
  try {
    const backend = await startBackendProcess()
    const bundle = allowRejectBundle(dir)
    const builds: [string, string][] = [['current', CLI]]
    if (BASELINE !== undefined) builds.push(['baseline', join(resolve(BASELINE), 'dist/cli.js')])
    const targets: Target[] = []
    for (const [build, cli] of builds) {
      const proxy = await gateway(cli, `${build}-proxy`, { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundle }, cpu)
      const decision = await gateway(cli, `${build}-decision`, { FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: bundle }, cpu)
      targets.push({ name: `${build} proxied reject`, scenario: 'proxied reject', server: proxy, kind: 'gateway' })
      targets.push({ name: `${build} decision reject`, scenario: 'decision reject', server: decision, kind: 'gateway' })
    }
    const heads: string[] = []
    for (const s of SCENARIOS) {
      const gw = targets.find((t) => t.scenario === s)!
      const answer = await rejectOf(gw.server, s)
      for (const other of targets.filter((t) => t.scenario === s && t !== gw)) await rejectOf(other.server, s) // spend their token too
      targets.push({ name: `ceiling, ${s} headers`, scenario: s, server: await ceiling(`ceiling ${s}`, answer, cpu), kind: 'ceiling' })
      const names = answer.headers.filter((_, i) => i % 2 === 0)
      heads.push(`${s}: ${names.length} headers besides node's own (${names.join(', ')}), body ${answer.body.length} bytes ${answer.body}`)
    }
    const measured = async (t: Target, seconds: number): Promise<LoadResult> => {
      const before = cpuMicros(t.server.proc.pid)
      const r = await load(t, seconds)
      check(t, r)
      const after = cpuMicros(t.server.proc.pid)
      if (before !== undefined && after !== undefined) {
        if (!cpuPerRequest.has(t.name)) cpuPerRequest.set(t.name, [])
        cpuPerRequest.get(t.name)!.push((after - before) / r.requests)
      }
      return r
    }
    for (const t of targets) await measured(t, 1) // warm-up: JIT, connections
    cpuPerRequest.clear()
    const runs = new Map<string, LoadResult[]>(targets.map((t) => [t.name, []]))
    for (let round = 0; round < ROUNDS; round++)
      for (let i = 0; i < targets.length; i++) {
        const t = targets[(i + round) % targets.length]!
        runs.get(t.name)!.push(await measured(t, SECONDS))
      }
    // Each gateway and its ceiling at the same time on CPU 0 (the verdict).
    const together = new Map<string, number[]>(targets.filter((t) => t.kind === 'gateway').map((t) => [t.name, []]))
    for (let round = 0; round < ROUNDS; round++)
      for (const gw of targets.filter((t) => t.kind === 'gateway')) {
        const top = targets.find((t) => t.kind === 'ceiling' && t.scenario === gw.scenario)!
        const [rg, rc] = await Promise.all([load(gw, SECONDS), load(top, SECONDS)])
        check(gw, rg)
        check(top, rc)
        together.get(gw.name)!.push(rg.rps / rc.rps)
      }

    console.log(
      `\n${ROUNDS} interleaved rounds × ${SECONDS} s per target, wrk -t1 -c${CONNECTIONS}, keep-alive, 127.0.0.1, node ${process.version}; ` +
        `servers on CPU ${cpu ?? '(unpinned)'}, wrk on CPU ${cpus?.rest ?? '(unpinned)'}${BASELINE ? `; baseline ${BASELINE}` : ''}`,
    )
    for (const h of heads) console.log(`  ${h}`)
    const cpuMed = (name: string): number => median(cpuPerRequest.get(name) ?? [])
    console.log(
      `\n${table([
        ['target', 'requests/s (median)', 'CPU µs/request', 'rounds (requests/s)'],
        ...targets.map((t) => {
          const rs = runs.get(t.name)!
          return [
            t.name,
            String(Math.round(median(rs.map((r) => r.rps)))),
            cpuMed(t.name).toFixed(1),
            rs.map((r) => Math.round(r.rps)).join(', '),
          ]
        }),
      ])}\n`,
    )
    let met = true
    const fmt = (xs: number[]): string => xs.map((x) => x.toFixed(3)).join(', ')
    for (const gw of targets.filter((t) => t.kind === 'gateway')) {
      const top = `ceiling, ${gw.scenario} headers`
      const perRound = cpuPerRequest.get(gw.name)!.map((g, i) => cpuPerRequest.get(top)![i]! / g)
      const ratio = median(perRound)
      const seq = median(runs.get(gw.name)!.map((r, i) => r.rps / runs.get(top)![i]!.rps))
      const same = together.get(gw.name)!
      if (gw.name.startsWith('current')) met &&= ratio >= GOAL
      console.log(
        `${`${gw.name} / ceiling`.padEnd(34)} = ${ratio.toFixed(3)} by CPU per request (goal ≥ ${GOAL}: ${ratio >= GOAL ? 'met' : 'MISSED'}; per round ${fmt(perRound)})\n` +
          `${''.padEnd(36)} requests/s: ${seq.toFixed(3)} one after the other (per round ${fmt(runs.get(gw.name)!.map((r, i) => r.rps / runs.get(top)![i]!.rps))}), ` +
          `${median(same).toFixed(3)} at the same time on one CPU (per round ${fmt(same)})`,
      )
    }
    if (BASELINE !== undefined)
      for (const s of SCENARIOS) {
        const [c, b] = [`current ${s}`, `baseline ${s}`]
        console.log(
          `${`current / baseline, ${s}`.padEnd(34)} = ${median(runs.get(c)!.map((r, i) => r.rps / runs.get(b)![i]!.rps)).toFixed(3)} one after the other; ` +
            `CPU per request ${median(cpuPerRequest.get(c)!.map((x, i) => x / cpuPerRequest.get(b)![i]!)).toFixed(3)}× (median of rounds)`,
        )
      }
    process.exitCode = met ? 0 : 1
  } finally {
    await stopAll() // the gateways write their CPU profiles on exit
  }
  if (PROFILE_DIR)
    for (const label of ['current-proxy', 'current-decision']) {
      console.log(`\nhottest functions, ${label} gateway, self time:`)
      for (const line of hotSpots(join(PROFILE_DIR, label), 25)) console.log(line)
    }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
