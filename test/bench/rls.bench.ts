/**
 * What one ShouldRateLimit call with many descriptors costs the gateway, on
 * the in-process store and on Redis (a redis-server the benchmark starts).
 * One gateway process per store and cap (decision service, one thread,
 * pinned to CPU 0; this process and Redis on the other CPUs), called over
 * node:http2 with pre-encoded messages so that no client codec is timed:
 *
 *   - default cap (FAIRVISOR_RLS_MAX_DESCRIPTORS=256): a 4 MiB call (the gRPC
 *     message cap, 599,184 one-entry descriptors) and a 2.9 MB one of 100,000
 *     descriptors as the attack sent them, refused before decoding; 256
 *     descriptors (the cap), decided;
 *   - cap raised to 1,000,000: 10,000, 40,000 and 100,000 descriptors decided
 *     (linear: the time per 1,000 descriptors stays flat), and the 4 MiB call
 *     decided (599,184 charges of one counter), which is what the cap spares
 *     the gateway.
 *
 * Per row: wall time per call (median and slowest), the gateway's CPU per call
 * (/proc), and on Redis the script's own time per call (INFO commandstats).
 * Then, in this process, the wire count of the 4 MiB message against
 * protobufjs decoding it.
 *
 *   npm run build && flock /tmp/fv-heavy.lock node --import tsx test/bench/rls.bench.ts [calls=20]
 */
import { writeFileSync } from 'node:fs'
import { connect, type ClientHttp2Session } from 'node:http2'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { method } from '../../src/grpc/protos.js'
import { countDescriptors } from '../../src/grpc/rls-cap.js'
import { grpcFrame, MAX_MESSAGE_BYTES } from '../../src/grpc/wire.js'
import { startRedis } from '../helpers/redis-servers.js'
import { cpuMicros, freePort, median, pinCpus, startGatewayProcess, stopAll, table, tempDir, type Running } from './lib.js'

const CALLS = Number(process.argv[2] ?? 20)
const RLS = method('envoy.service.ratelimit.v3.RateLimitService', 'ShouldRateLimit')
const dir = tempDir('fv-bench-rls-')

let tag = 0
/** `n` descriptors, framed: each on a counter of its own (a `client` value as long as an address), or all `k` without a value. */
function message(n: number, value = true): Buffer {
  const t = `${process.pid}-${tag++}`
  const descriptors = Array.from({ length: n }, (_, i) => ({
    entries: [{ key: value ? 'client' : 'k', value: value ? `${t}-${i}` : undefined }],
  }))
  return grpcFrame(RLS.encodeRequest({ domain: 'bench', descriptors }))
}

/** The largest message of one-entry descriptors (key `k`, no value: 7 bytes each) under the 4 MiB cap. */
const MAX_DESCRIPTORS = Math.floor((MAX_MESSAGE_BYTES - 16) / 7)

interface Answer {
  ms: number
  status: string
  bytes: number
}

/** One call of a framed message; the answer's status and size. */
function call(session: ClientHttp2Session, frame: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const req = session.request({ ':method': 'POST', ':path': RLS.path, 'content-type': 'application/grpc', te: 'trailers' })
    let status = ''
    let bytes = 0
    req.on('response', (h) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']) // trailers-only
    })
    req.on('trailers', (h) => {
      status = String(h['grpc-status'])
    })
    req.on('data', (c: Buffer) => {
      bytes += c.length
    })
    req.on('end', () => resolve({ ms: performance.now() - t0, status, bytes }))
    req.on('error', reject)
    req.end(frame)
  })
}

/** Script time and calls so far (INFO commandstats), for EVALSHA and EVAL together. */
function scriptStats(cli: (...a: string[]) => string): { usec: number; calls: number } {
  let usec = 0
  let calls = 0
  for (const m of cli('info', 'commandstats').matchAll(/cmdstat_eval(?:sha)?:calls=(\d+),usec=(\d+)/g)) {
    calls += Number(m[1])
    usec += Number(m[2])
  }
  return { usec, calls }
}

interface Gateway {
  store: string
  cap: number
  gw: Running
  session: ClientHttp2Session
}

async function gateway(store: string, storeUrl: string, cap: number, cpu: string | undefined): Promise<Gateway> {
  const rls = join(dir, 'rls.yaml')
  // `client`: a counter per value; `k` (the 4 MiB message's key, without values): one counter for all of them.
  const limit = '    rate_limit: {unit: minute, requests_per_unit: 4000000000}\n'
  writeFileSync(rls, `domain: bench\ndescriptors:\n  - key: client\n${limit}  - key: k\n${limit}`)
  const grpcPort = await freePort()
  const gw = await startGatewayProcess(
    {
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_STORE: storeUrl,
      // A store call of 100,000 checks takes Redis a fraction of a second: decided, not answered by the fail policy.
      FAIRVISOR_STORE_TIMEOUT_MS: '60000',
      FAIRVISOR_RLS_CONFIG: rls,
      FAIRVISOR_RLS_MAX_DESCRIPTORS: String(cap),
      FAIRVISOR_GRPC_PORT: String(grpcPort),
    },
    [],
    cpu,
  )
  const session = connect(`http://127.0.0.1:${grpcPort}`)
  await new Promise<void>((resolve, reject) => session.once('connect', () => resolve()).once('error', reject))
  return { store, cap, gw, session }
}

interface Row {
  what: string
  frame: Buffer
  descriptors: number
  calls: number
  expect: string
}

async function measure(g: Gateway, row: Row, redisCli: ((...a: string[]) => string) | undefined): Promise<string[]> {
  await call(g.session, message(1)) // the connection warm
  const s0 = redisCli && scriptStats(redisCli)
  const c0 = cpuMicros(g.gw.proc.pid)
  const ms: number[] = []
  let answered = 0
  for (let i = 0; i < row.calls; i++) {
    const a = await call(g.session, row.frame)
    if (a.status !== row.expect) throw new Error(`${g.store} ${row.what}: grpc-status ${a.status}, expected ${row.expect}`)
    ms.push(a.ms)
    answered = a.bytes
  }
  const cpuMs = (cpuMicros(g.gw.proc.pid)! - c0!) / 1000 / row.calls
  const s1 = redisCli && scriptStats(redisCli)
  const script = s0 && s1 && s1.calls > s0.calls ? ((s1.usec - s0.usec) / 1000 / row.calls).toFixed(2) : '—'
  const m = median(ms)
  return [
    g.store,
    `cap ${g.cap}`,
    row.what,
    (row.frame.length / 1024 / 1024).toFixed(2),
    row.expect === '0' ? 'OK' : 'RESOURCE_EXHAUSTED',
    String(row.calls),
    m.toFixed(2),
    Math.max(...ms).toFixed(2),
    cpuMs.toFixed(2),
    script,
    row.expect === '0' ? (m / (row.descriptors / 1000)).toFixed(2) : '—',
    String(answered),
  ]
}

function codec(): string[][] {
  const bytes = message(MAX_DESCRIPTORS, false).subarray(5)
  const time = (f: () => unknown, n: number): number => {
    f()
    const t0 = performance.now()
    for (let i = 0; i < n; i++) f()
    return (performance.now() - t0) / n
  }
  return [
    ['in this process, the 4 MiB message', 'ms'],
    ['countDescriptors, stops past 256', time(() => countDescriptors(bytes, 256), 1000).toFixed(4)],
    ['countDescriptors, every descriptor', time(() => countDescriptors(bytes, Number.MAX_SAFE_INTEGER), 20).toFixed(2)],
    ['protobufjs decode', time(() => RLS.decode(bytes), 3).toFixed(0)],
  ]
}

async function main(): Promise<void> {
  const pin = pinCpus()
  const redis = await startRedis()
  try {
    const huge = message(MAX_DESCRIPTORS, false)
    const attack = message(100_000)
    const rows: string[][] = [
      [
        'store',
        'setting',
        'descriptors',
        'MiB',
        'answer',
        'calls',
        'median ms',
        'max ms',
        'gateway CPU ms/call',
        'script ms/call',
        'ms per 1k descriptors',
        'answer bytes',
      ],
    ]
    for (const [store, url] of [
      ['memory', 'memory'],
      ['redis', redis.url],
    ] as const) {
      const cli = store === 'redis' ? redis.cli : undefined
      const capped = await gateway(store, url, 256, pin?.gateway)
      for (const row of [
        { what: `${MAX_DESCRIPTORS.toLocaleString('en')} (4 MiB)`, frame: huge, descriptors: MAX_DESCRIPTORS, calls: CALLS, expect: '8' },
        { what: '100,000', frame: attack, descriptors: 100_000, calls: CALLS, expect: '8' },
        // Ten times the calls: a call this size is over in a few ms, and the first ones are still compiling.
        { what: '256', frame: message(256), descriptors: 256, calls: CALLS * 10, expect: '0' },
      ])
        rows.push(await measure(capped, row, cli))
      capped.session.close()
      await capped.gw.stop()
      const raised = await gateway(store, url, 1_000_000, pin?.gateway)
      await call(raised.session, message(10_000)) // compiled for long calls before the first row
      for (const n of [10_000, 40_000, 100_000])
        rows.push(
          await measure(
            raised,
            { what: n.toLocaleString('en'), frame: message(n), descriptors: n, calls: Math.max(1, Math.round(CALLS / 7)), expect: '0' },
            cli,
          ),
        )
      rows.push(
        await measure(
          raised,
          { what: `${MAX_DESCRIPTORS.toLocaleString('en')} (4 MiB)`, frame: huge, descriptors: MAX_DESCRIPTORS, calls: 1, expect: '0' },
          cli,
        ),
      )
      raised.session.close()
      await raised.gw.stop()
    }
    console.log(
      `Node ${process.versions.node}, load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}\n`,
    )
    console.log(table(rows))
    console.log()
    console.log(table(codec()))
  } finally {
    await redis.stop()
    await stopAll()
  }
}

await main()
