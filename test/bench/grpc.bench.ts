/**
 * gRPC decisions against the HTTP decision API, in one run on one gateway
 * process (memory store, one thread, pinned to CPU 0): ext_authz Check
 * (allow) and ShouldRateLimit (OK) driven by h2load, POST /v1/decision
 * (allow) driven by wrk, both load generators one C thread on CPU 1. gRPC
 * runs as Envoy calls it (4 connections × 8 streams) and one call per
 * connection (32 × 1, as wrk's 32 keep-alive connections). Rounds are
 * interleaved with a rotating order; medians, and the gateway's own CPU per
 * decision read from /proc. Every gRPC call is checked to have answered OK
 * (the gateway's fairvisor_grpc_calls_total), every HTTP one 200.
 * Two floors run beside them on the same CPU, to show what the transports
 * themselves cost: a node:http server and a node:http2 server that answer a
 * constant without deciding anything (HTTP/1.1 body; one gRPC message with
 * trailers). Then the codec alone: decode + encode of a typical CheckRequest.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/grpc.bench.ts [seconds=5] [rounds=3]
 *
 * With FV_BASELINE_DIR=<another checkout, dist/ built> a second gateway of
 * that build runs beside this one, on the same CPU, with the same files: its
 * Check and ShouldRateLimit rounds are interleaved with this build's and the
 * table ends with this build's rate over the baseline's (no regression: ≥ 0.95).
 *
 * Needs wrk and h2load (Debian: wrk, nghttp2-client).
 */
import { writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { method } from '../../src/grpc/protos.js'
import { checkRequest } from '../helpers/grpc-client.js'
import { runH2load } from './h2load.js'
import {
  cpuMicros,
  freePort,
  haveCommand,
  interleave,
  median,
  pinCpus,
  runLoad,
  spawnServer,
  startGatewayProcess,
  stopAll,
  table,
  tempDir,
  type LoadResult,
} from './lib.js'

const SECONDS = Number(process.argv[2] ?? 5)
const BASELINE = process.env.FV_BASELINE_DIR
const ROUNDS = Number(process.argv[3] ?? 3)
const dir = tempDir('fv-bench-grpc-')

const CHECK = method('envoy.service.auth.v3.Authorization', 'Check')
const RLS = method('envoy.service.ratelimit.v3.RateLimitService', 'ShouldRateLimit')
const checkMessage = CHECK.encodeRequest(
  checkRequest({ path: '/allow/items?page=1', host: 'api.example.com', headers: { 'x-user': 'bench-user' } }),
)
const rlsMessage = RLS.encodeRequest({ domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: 'bench-user' }] }] })

function files(): { bundle: string; rls: string } {
  const bundle = join(dir, 'bundle.json')
  writeFileSync(
    bundle,
    JSON.stringify({
      bundle_version: 1,
      // Never runs out: every call is a full evaluation that charges one token and allows.
      policies: [
        {
          id: 'allow',
          spec: {
            selector: { pathPrefix: '/allow/' },
            rules: [
              {
                name: 'allow_user',
                limit_keys: ['header:x-user'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 1e9, burst: 1e9 },
              },
            ],
          },
        },
      ],
    }),
  )
  const rls = join(dir, 'rls.yaml')
  writeFileSync(rls, 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 4000000000}\n')
  return { bundle, rls }
}

/** fairvisor_grpc_calls_total by code (summed over methods), from the gateway's /metrics. */
async function grpcCalls(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const out = new Map<string, number>()
  for (const m of text.matchAll(/^fairvisor_grpc_calls_total\{[^}]*code="(\w+)"[^}]*\} (\d+)/gm))
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]))
  return out
}

function codec(): number {
  const n = 200_000
  const run = (): void => void CHECK.encodeRequest(CHECK.decode(checkMessage) as object)
  for (let i = 0; i < 20_000; i++) run()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) run()
  return n / ((performance.now() - t0) / 1000)
}

interface Target {
  name: string
  run(gatewayUrl: string, grpcUrl: string): Promise<LoadResult>
}

async function main(): Promise<void> {
  for (const tool of ['wrk', 'h2load']) if (!haveCommand(tool)) throw new Error(`${tool} is not on PATH (Debian: wrk, nghttp2-client)`)
  const pin = pinCpus()
  const f = files()
  const start = async (cli?: string) => {
    const port = await freePort()
    const env = {
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: f.bundle,
      FAIRVISOR_RLS_CONFIG: f.rls,
      FAIRVISOR_GRPC_PORT: String(port),
    }
    return { gw: await startGatewayProcess(env, [], pin?.gateway, cli), grpcUrl: `http://127.0.0.1:${port}` }
  }
  const { gw, grpcUrl } = await start()
  const baseline = BASELINE === undefined ? undefined : await start(join(resolve(BASELINE), 'dist/cli.js'))
  const h2 =
    (path: string, message: Buffer, clients: number, streams: number, url = grpcUrl) =>
    (): Promise<LoadResult> =>
      runH2load({ url: url + path, message, clients, streams, seconds: SECONDS, dir })
  // The transports alone, in their own processes on the gateway's CPU.
  const floorArgs = (code: string): string[] => [
    '-e',
    `${code}.listen(0, '127.0.0.1', function () { console.log('PORT ' + this.address().port) })`,
  ]
  const pinned = (args: string[]): [string, string[]] =>
    pin ? ['taskset', ['-c', pin.gateway, process.execPath, ...args]] : [process.execPath, args]
  const http1Floor = await spawnServer(
    'node:http constant',
    ...pinned(
      floorArgs(
        `const b = Buffer.from('{}'); require('node:http').createServer((q, s) => { q.resume(); q.on('end', () => { s.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 }); s.end(b) }) })`,
      ),
    ),
  )
  const http2Floor = await spawnServer(
    'node:http2 constant gRPC',
    ...pinned(
      floorArgs(
        `const f = Buffer.from([0, 0, 0, 0, 2, 8, 1]); const s = require('node:http2').createServer(); s.on('stream', (st) => { st.resume(); st.on('end', () => { st.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }); st.once('wantTrailers', () => st.sendTrailers({ 'grpc-status': '0' })); st.end(f) }) }); s`,
      ),
    ),
  )
  const targets: Target[] = [
    {
      name: 'HTTP POST /v1/decision (allow), wrk 32 connections',
      run: (url) =>
        runLoad({
          url: `${url}/v1/decision`,
          connections: 32,
          seconds: SECONDS,
          method: 'POST',
          headers: {
            'X-Original-Method': 'GET',
            'X-Original-URI': '/allow/items?page=1',
            'X-Original-Host': 'api.example.com',
            'X-User': 'bench-user',
          },
        }),
    },
    { name: 'gRPC Check (allow), 4 connections × 8 streams', run: h2(CHECK.path, checkMessage, 4, 8) },
    { name: 'gRPC Check (allow), 32 connections × 1 stream', run: h2(CHECK.path, checkMessage, 32, 1) },
    { name: 'gRPC ShouldRateLimit (OK), 4 connections × 8 streams', run: h2(RLS.path, rlsMessage, 4, 8) },
    {
      name: 'floor: node:http constant 200, wrk 32 connections',
      run: () => runLoad({ url: http1Floor.url, connections: 32, seconds: SECONDS, method: 'POST' }),
    },
    {
      name: 'floor: node:http2 constant gRPC answer, 4 × 8 streams',
      run: () => runH2load({ url: `${http2Floor.url}/x.Y/Z`, message: Buffer.alloc(0), clients: 4, streams: 8, seconds: SECONDS, dir }),
    },
  ]
  const floors = new Map([
    [targets[4]!.name, http1Floor],
    [targets[5]!.name, http2Floor],
  ])
  // The same calls to the baseline build, interleaved with this build's.
  const compared: Array<[string, string]> = []
  if (baseline !== undefined)
    for (const [i, t] of [
      [1, h2(CHECK.path, checkMessage, 4, 8, baseline.grpcUrl)],
      [3, h2(RLS.path, rlsMessage, 4, 8, baseline.grpcUrl)],
    ] as const) {
      const name = `baseline: ${targets[i]!.name}`
      targets.push({ name, run: t })
      compared.push([targets[i]!.name, name])
    }
  const gatewayOf = (name: string) => (name.startsWith('baseline: ') ? baseline!.gw : gw)
  const cpu = new Map<string, number[]>(targets.map((t) => [t.name, []]))
  try {
    const runs = await interleave(targets, ROUNDS, async (t) => {
      const pid = (floors.get(t.name) ?? gatewayOf(t.name)).proc.pid
      const served = gatewayOf(t.name).url
      const before = await grpcCalls(served)
      const c0 = cpuMicros(pid)!
      const r = await t.run(gw.url, grpcUrl)
      cpu.get(t.name)!.push((cpuMicros(pid)! - c0) / r.requests)
      const after = await grpcCalls(served)
      for (const [code, n] of after)
        if (code !== 'OK' && n !== (before.get(code) ?? 0))
          throw new Error(`${t.name}: ${n - (before.get(code) ?? 0)} calls answered ${code}`)
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx, ${r.errors} errors`)
      if (r.tool === 'h2load' && !floors.has(t.name) && (after.get('OK') ?? 0) - (before.get('OK') ?? 0) < r.requests)
        throw new Error(`${t.name}: fewer calls answered OK than h2load counted`)
      return r
    })
    const base = median(runs.get(targets[0]!.name)!.map((r) => r.rps))
    const baseCpu = median(cpu.get(targets[0]!.name)!)
    console.log(
      `\n${ROUNDS} interleaved rounds × ${SECONDS} s, gateway on CPU ${pin?.gateway ?? '(unpinned)'}, load generator on CPU ${pin?.rest ?? '(unpinned)'}, memory store, node ${process.version}\n`,
    )
    const rows = [['run', 'decisions/s (median)', 'vs HTTP', 'server CPU µs per call', 'rounds']]
    for (const t of targets) {
      const rps = median(runs.get(t.name)!.map((r) => r.rps))
      const us = median(cpu.get(t.name)!)
      rows.push([
        t.name,
        String(Math.round(rps)),
        (rps / base).toFixed(2),
        `${us.toFixed(1)} (HTTP's / this: ${(baseCpu / us).toFixed(2)})`,
        runs
          .get(t.name)!
          .map((r) => Math.round(r.rps))
          .join(', '),
      ])
    }
    console.log(table(rows))
    if (baseline !== undefined) {
      const ratio = (name: string) => median(runs.get(name)!.map((r) => r.rps))
      console.log(`\nthis build / baseline (${BASELINE}), medians, same CPU, interleaved (≥ 0.95: no regression):`)
      // CPU per call is the steadier figure on a loaded machine: the rate moves with what else runs.
      const cpuOf = (name: string) => median(cpu.get(name)!)
      for (const [ours, theirs] of compared)
        console.log(
          `  ${ours}: rate ${(ratio(ours) / ratio(theirs)).toFixed(3)}, CPU per call (baseline's / this) ${(cpuOf(theirs) / cpuOf(ours)).toFixed(3)}`,
        )
    }
  } finally {
    await stopAll()
  }
  console.log(`\nCheckRequest decode + encode (@grpc/proto-loader, protobufjs): ${Math.round(codec())} ops/s`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
