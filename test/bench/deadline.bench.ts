/**
 * How many requests a remote store lets through unchecked at its deadline:
 * two gateways on one store, 128 keep-alive connections each, one key of a
 * `burst 120, 120/s` bucket (a limit of ~720 in 5 s; the rate, also the
 * burst, is the fourth argument), fail-open. Prints the
 * exact allows (the store said yes), the fail-open allows
 * (fairvisor_store_fail_open_total) and the limit for the elapsed time.
 *
 *   flock /tmp/fv-heavy.lock npm run bench -- deadline [store URL] [deadline ms, '' for the gateway's default] [seconds, default 5] [tokens per second, default 120]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { metricValue, startBackend, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { dropPrefix, PG_URL, uniquePrefix } from '../helpers/postgres-db.js'

const [url = PG_URL, deadline, seconds = '5', rate = '120'] = process.argv.slice(2)
const PER_GATEWAY = 128
const dir = mkdtempSync(join(tmpdir(), 'fv-deadline-'))
const prefix = uniquePrefix('dl')
const backend = await startBackend()
const env = {
  FAIRVISOR_BACKEND_URL: backend.url,
  FAIRVISOR_CONFIG_FILE: writeHeaderBucketBundle(dir, 'shared_key', { burst: Number(rate), tokens_per_second: Number(rate) }),
  FAIRVISOR_STORE: url,
  FAIRVISOR_PG_TABLE_PREFIX: prefix,
  FAIRVISOR_FAIL_POLICY: 'open',
  ...(deadline === undefined || deadline === '' ? {} : { FAIRVISOR_STORE_TIMEOUT_MS: deadline }),
}
const gws: GatewayProcess[] = await Promise.all([startGateway(env, { timeoutMs: 60_000 }), startGateway(env, { timeoutMs: 60_000 })])
// A bundle the gateway refuses would leave every request unlimited: measure nothing then.
const applied = await gws[0]!.waitForLog((l) => l.msg === 'bundle applied', 30_000)
if (applied.policies !== 1)
  throw new Error(`the benchmark's bundle was not applied: ${JSON.stringify(gws[0]!.logs.filter((l) => l.level === 'error'))}`)
const pools = gws.map((gw) => new Pool(gw.url, { connections: PER_GATEWAY, pipelining: 1 }))
try {
  let allowed = 0
  let total = 0
  const t0 = performance.now()
  const end = t0 + Number(seconds) * 1000
  const client = async (g: number): Promise<void> => {
    while (performance.now() < end) {
      const r = await pools[g]!.request({ path: '/', method: 'GET', headers: { 'x-user': 'shared' } })
      await r.body.dump()
      total++
      if (r.statusCode === 200) allowed++
    }
  }
  await Promise.all(Array.from({ length: 2 * PER_GATEWAY }, (_, i) => client(i % 2)))
  const elapsed = (performance.now() - t0) / 1000
  // Read from the decisions (as fairvisor_store_fail_open_total counts them), so releases without that metric compare too.
  let failOpen = 0
  for (const gw of gws) failOpen += (await metricValue(gw, 'fairvisor_decisions_total', 'reason="store_unavailable_fail_open"')) ?? 0
  console.log(
    JSON.stringify({
      store: url.replace(/\/\/[^@]*@/, '//'),
      deadlineMs: deadline || 'default',
      elapsedS: +elapsed.toFixed(2),
      requests: total,
      exactAllows: allowed - failOpen,
      failOpenAllows: failOpen,
      limit: Math.floor(Number(rate) * (1 + elapsed)),
    }),
  )
} finally {
  await Promise.all(pools.map((p) => p.close()))
  await Promise.all(gws.map((g) => g.stop()))
  await backend.close()
  if (url.startsWith('postgres')) await dropPrefix(prefix)
  rmSync(dir, { recursive: true, force: true })
}
