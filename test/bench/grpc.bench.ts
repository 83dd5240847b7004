/**
 * gRPC throughput against the HTTP decision API, in one run on one gateway
 * process (memory store): ext_authz Check (allow), ShouldRateLimit (OK) and
 * POST /v1/decision (allow), each driven for the same time by the same
 * in-process Node load generator with the same number of calls in flight
 * (so the generator's own cost is alike for all three). Then the codec
 * itself: decode + encode of a typical CheckRequest.
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/grpc.bench.ts [seconds=5] [inflight=32]
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { loadSync } from '@grpc/proto-loader'
import { Pool } from 'undici'
import { LOADER_OPTIONS, PROTO_FILES } from '../../src/grpc/protos.js'
import { checkRequest, grpcClients } from '../helpers/grpc-client.js'
import { startGateway } from '../helpers/processes.js'

const SECONDS = Number(process.argv[2] ?? 5)
const INFLIGHT = Number(process.argv[3] ?? 32)

/** Calls/s of `call` with INFLIGHT in flight for `seconds`; throws when a call does not give the expected answer. */
async function drive(seconds: number, call: () => Promise<boolean>): Promise<number> {
  let done = 0
  const end = performance.now() + seconds * 1000
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: INFLIGHT }, async () => {
      while (performance.now() < end) {
        if (!(await call())) throw new Error('unexpected answer')
        done++
      }
    }),
  )
  return done / ((performance.now() - t0) / 1000)
}

/** CPU seconds (user + system) the process has used so far, from /proc (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

function codec(): number {
  const def = loadSync(PROTO_FILES, LOADER_OPTIONS)
  const m = def['envoy.service.auth.v3.Authorization'] as unknown as Record<
    string,
    { requestSerialize(v: object): Buffer; requestDeserialize(b: Buffer): object }
  >
  const check = m.Check!
  const bytes = check.requestSerialize(
    checkRequest({
      path: '/api/v1/items?page=2',
      headers: {
        'user-agent': 'curl/8.5.0',
        accept: '*/*',
        authorization: 'Bearer abc.def.ghi',
        'x-user': 'alice',
        'x-forwarded-for': '203.0.113.9',
        'x-request-id': '6f1c2a40-2f7e-4b8e-9d43-1a2b3c4d5e6f',
      },
    }),
  )
  const n = 200_000
  for (let i = 0; i < 20_000; i++) check.requestSerialize(check.requestDeserialize(bytes))
  const t0 = performance.now()
  for (let i = 0; i < n; i++) check.requestSerialize(check.requestDeserialize(bytes))
  return n / ((performance.now() - t0) / 1000)
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-bench-grpc-'))
  writeFileSync(
    join(dir, 'bundle.json'),
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
  writeFileSync(
    join(dir, 'rls.yaml'),
    'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 4000000000}\n',
  )
  const gw = await startGateway({
    FAIRVISOR_MODE: 'decision_service',
    FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'),
    FAIRVISOR_RLS_CONFIG: join(dir, 'rls.yaml'),
    FAIRVISOR_GRPC_PORT: '0',
  })
  const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
  const c = grpcClients(line.grpcPort as number)
  const pool = new Pool(gw.url, { connections: INFLIGHT, pipelining: 1 })
  const rows: Array<[string, number, number]> = []
  const pid = gw.proc.pid!
  const measure = async (name: string, f: () => Promise<boolean>): Promise<void> => {
    const cpu0 = cpuSeconds(pid)
    const t0 = performance.now()
    const rps = await drive(SECONDS, f)
    const calls = rps * ((performance.now() - t0) / 1000)
    // The gateway's CPU per decision: what the listener costs, whatever the load generator or the machine's other load does.
    rows.push([name, rps, calls / Math.max(0.01, cpuSeconds(pid) - cpu0)])
  }
  try {
    const req = checkRequest({ path: '/allow/items?page=1', host: 'api.example.com', headers: { 'x-user': 'bench-user' } })
    const check = async (): Promise<boolean> => (await c.check(req)).http_response === 'ok_response'
    const rlsReq = { domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: 'bench-user' }] }] }
    const rls = async (): Promise<boolean> => (await c.shouldRateLimit(rlsReq)).overall_code === 1
    const headers = {
      'x-original-method': 'GET',
      'x-original-uri': '/allow/items?page=1',
      'x-original-host': 'api.example.com',
      'x-user': 'bench-user',
    }
    const http = async (): Promise<boolean> => {
      const r = await pool.request({ path: '/v1/decision', method: 'POST', headers })
      await r.body.dump()
      return r.statusCode === 200
    }
    for (const f of [http, check, rls]) await drive(1, f) // warm-up
    await measure('HTTP POST /v1/decision (allow)', http)
    await measure('gRPC ext_authz Check (allow)', check)
    await measure('gRPC ShouldRateLimit (OK)', rls)
  } finally {
    c.close()
    await pool.close()
    await gw.stop()
  }
  const [, base, baseCpu] = rows[0]!
  console.log(
    `\n${SECONDS} s per run, ${INFLIGHT} calls in flight, one in-process Node load generator, memory store, node ${process.version}\n`,
  )
  console.log('| run | decisions/s | vs HTTP | decisions per gateway CPU-second | vs HTTP |')
  console.log('|---|---:|---:|---:|---:|')
  for (const [name, rps, perCpu] of rows)
    console.log(`| ${name} | ${Math.round(rps)} | ${(rps / base).toFixed(2)} | ${Math.round(perCpu)} | ${(perCpu / baseCpu).toFixed(2)} |`)
  console.log(`\nCheckRequest decode + encode (@grpc/proto-loader): ${Math.round(codec())} ops/s`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
