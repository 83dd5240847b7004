/**
 * Policy-engine throughput in reverse-proxy mode, next to the bare undici
 * proxy and nginx `limit_req`, in one run:
 *
 *   - gateway allow:  a policy that never rejects (huge burst), every request
 *                     evaluated, charged one token and proxied to the backend;
 *   - gateway reject: a policy that rejects almost everything (burst 1, tiny
 *                     rate, one key), answered 429 without the backend;
 *   - bare proxy:     test/bench/bare-proxy.ts in front of the same backend;
 *   - node:http constant 429: the ceiling of any reject path on node:http;
 *   - nginx allow / nginx reject (when nginx is on PATH): one worker, upstream
 *                     keepalive, `limit_req_zone` keyed on a constant,
 *                     `limit_req_status 429`.
 *
 * Rounds are interleaved (every target once per round, order rotated) and
 * the median of the rounds is reported, so a noisy neighbour on the machine
 * skews all targets alike. Load: wrk, one thread, keep-alive connections.
 * Targets: gateway allow ≥ 0.95 × bare proxy; gateway reject ≥ 3 × bare proxy.
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/engine.bench.ts [seconds=5] [rounds=3] [connections=32]
 *
 * FV_BENCH_PROFILE=<dir> runs the gateways under `node --cpu-prof` and prints
 * their hottest functions (share of busy self time) at the end.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { hotSpots } from './cpu-profile.js'
import {
  haveCommand,
  interleave,
  pairedRatio,
  runLoad,
  spawnServer,
  startBackendProcess,
  startBareProxy,
  startGatewayProcess,
  startNginx,
  stopAll,
  summarise,
  table,
  tempDir,
  type LoadResult,
} from './lib.js'

const SECONDS = Number(process.argv[2] ?? 5)
const ROUNDS = Number(process.argv[3] ?? 5)
const CONNECTIONS = Number(process.argv[4] ?? 32)
const PROFILE_DIR = process.env.FV_BENCH_PROFILE
const dir = tempDir('fv-bench-engine-')

interface Target {
  name: string
  url: string
  /** What every answer must be, so a wrong setup cannot pass silently. */
  expect: 'allow' | 'reject'
}

function bundle(name: string, config: Record<string, number>): string {
  const file = join(dir, `${name}.json`)
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: name,
          spec: {
            selector: { pathPrefix: '/' },
            rules: [{ name: `${name}_user`, limit_keys: ['header:x-user'], algorithm: 'token_bucket', algorithm_config: config }],
          },
        },
      ],
    }),
  )
  return file
}

function gateway(backendUrl: string, file: string, label: string) {
  const nodeArgs = PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', join(PROFILE_DIR, label)] : []
  return startGatewayProcess({ FAIRVISOR_BACKEND_URL: backendUrl, FAIRVISOR_CONFIG_FILE: file }, nodeArgs)
}

/** nginx limit_req, keyed on a constant (one bucket, like the gateway's one key), on two ports. */
async function nginxLimitReq(backendUrl: string, zone: 'allowing' | 'rejecting') {
  const backend = new URL(backendUrl).host
  const limit =
    zone === 'allowing'
      ? 'limit_req_zone "all" zone=allowing:1m rate=1000000r/s;' // with a huge burst: never rejects
      : 'limit_req_zone "all" zone=rejecting:1m rate=1r/m;' // burst 0: all but ~1 request a minute rejected
  return startNginx(
    (port) => `  upstream backend { server ${backend}; keepalive 64; }
  ${limit}
  limit_req_status 429;
  server {
    listen 127.0.0.1:${port};
    location / {
      limit_req zone=${zone}${zone === 'allowing' ? ' burst=1000000 nodelay' : ''};
      proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";
    }
  }`,
    `nginx limit_req ${zone}`,
  )
}

function check(t: Target, r: LoadResult): void {
  if (r.errors !== 0) throw new Error(`${t.name}: ${r.errors} socket errors`)
  if (t.expect === 'allow' && r.non2xx !== 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx answers on the allow path`)
  // A reject path answers 429 to all but the one token the bucket starts with (nginx: one a minute).
  if (t.expect === 'reject' && r.non2xx < r.requests - 2) throw new Error(`${t.name}: only ${r.non2xx} of ${r.requests} rejected`)
}

async function main(): Promise<void> {
  const haveNginx = haveCommand('nginx')
  try {
    const backend = await startBackendProcess()
    const bare = await startBareProxy(backend.url)
    const allowGw = await gateway(backend.url, bundle('allowing', { tokens_per_second: 1e9, burst: 1e12 }), 'allow')
    const rejectGw = await gateway(backend.url, bundle('rejecting', { tokens_per_second: 0.001, burst: 1 }), 'reject')
    // The ceiling of any reject path on node:http: a server that answers a constant 429 and does nothing else.
    const floor429 = await spawnServer('node:http constant 429', process.execPath, [
      '-e',
      `const b = Buffer.from('{"error":"too_many_requests"}');
require('http').createServer((q, s) => { s.writeHead(429, { 'content-type': 'application/json', 'content-length': b.length }); s.end(b) })
  .listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`,
    ])
    const targets: Target[] = [
      { name: 'bare undici proxy', url: bare.url, expect: 'allow' },
      { name: 'gateway allow', url: allowGw.url, expect: 'allow' },
      { name: 'gateway reject', url: rejectGw.url, expect: 'reject' },
      { name: 'node:http constant 429', url: floor429.url, expect: 'reject' },
    ]
    if (haveNginx) {
      targets.push({ name: 'nginx limit_req allow', url: (await nginxLimitReq(backend.url, 'allowing')).url, expect: 'allow' })
      targets.push({ name: 'nginx limit_req reject', url: (await nginxLimitReq(backend.url, 'rejecting')).url, expect: 'reject' })
    } else {
      console.error('nginx is not on PATH: no nginx comparison')
    }
    const load = async (t: Target, seconds: number): Promise<LoadResult> => {
      const r = await runLoad({ url: `${t.url}/items`, connections: CONNECTIONS, seconds, headers: { 'x-user': 'bench-user' } })
      check(t, r)
      return r
    }
    for (const t of targets) await load(t, 1) // warm-up: JIT, connection pools
    const runs = await interleave(targets, ROUNDS, (t) => load(t, SECONDS))
    const med = new Map([...runs].map(([name, rs]) => [name, summarise(rs)]))
    const tool = med.get('gateway allow')!.tool
    console.log(
      `\n${ROUNDS} interleaved rounds × ${SECONDS} s per target, ${tool} ${tool === 'wrk' ? '-t1 ' : ''}-c${CONNECTIONS}, keep-alive, 127.0.0.1, node ${process.version}; median of rounds\n`,
    )
    console.log(
      table([
        ['target', 'requests/s', 'p99 ms', 'rounds (requests/s)'],
        ...targets.map((t) => {
          const m = med.get(t.name)!
          return [
            t.name,
            String(Math.round(m.rps)),
            m.p99Ms.toFixed(2),
            runs
              .get(t.name)!
              .map((r) => Math.round(r.rps))
              .join(', '),
          ]
        }),
      ]),
    )
    const rps = (name: string) => med.get(name)?.rps ?? NaN
    // The verdict uses the median of per-round ratios (see pairedRatio); the ratio of medians is printed beside it.
    const allow = pairedRatio(runs, 'gateway allow', 'bare undici proxy')
    const reject = pairedRatio(runs, 'gateway reject', 'bare undici proxy')
    const allowRatio = allow.median
    const rejectRatio = reject.median
    const fmt = (xs: number[]) => xs.map((x) => x.toFixed(3)).join(', ')
    console.log('')
    console.log(
      `gateway allow  / bare proxy = ${allowRatio.toFixed(3)}  (target ≥ 0.95: ${allowRatio >= 0.95 ? 'met' : 'MISSED'}; per round ${fmt(allow.rounds)}; ratio of medians ${(rps('gateway allow') / rps('bare undici proxy')).toFixed(3)})`,
    )
    console.log(
      `gateway reject / bare proxy = ${rejectRatio.toFixed(2)}×  (target ≥ 3×: ${rejectRatio >= 3 ? 'met' : 'MISSED'}; per round ${fmt(reject.rounds)}; ratio of medians ${(rps('gateway reject') / rps('bare undici proxy')).toFixed(2)})`,
    )
    console.log(
      `  for scale: node:http constant 429 / bare proxy = ${(rps('node:http constant 429') / rps('bare undici proxy')).toFixed(2)}×, gateway reject / node:http constant 429 = ${(rps('gateway reject') / rps('node:http constant 429')).toFixed(3)}`,
    )
    if (haveNginx) {
      console.log(`gateway allow  / nginx limit_req allow  = ${(rps('gateway allow') / rps('nginx limit_req allow')).toFixed(3)}`)
      console.log(`gateway reject / nginx limit_req reject = ${(rps('gateway reject') / rps('nginx limit_req reject')).toFixed(3)}`)
    }
    process.exitCode = allowRatio >= 0.95 && rejectRatio >= 3 ? 0 : 1
  } finally {
    await stopAll() // the gateways write their CPU profiles on exit
  }
  if (PROFILE_DIR) {
    for (const label of ['allow', 'reject']) {
      console.log(`\nhottest functions of the gateway (${label} path), self time:`)
      for (const line of hotSpots(join(PROFILE_DIR, label))) console.log(line)
    }
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
