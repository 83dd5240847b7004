/**
 * Differential property test: the limit maths exists three times (TypeScript
 * for the in-process stores, Lua for Redis, PL/pgSQL for PostgreSQL). Random
 * sequences of (limit, cost, time step) of every kind in the kind table run
 * against the memory, shared-memory, Redis, Redis Cluster (three masters on
 * free ports, started and stopped by this file) and PostgreSQL stores must
 * give the same outcomes and values (test/helpers/differential.ts says within
 * what tolerance). A kind added to the table is drawn here as it is, from
 * its own `sample`: nothing to edit in this file. The token bucket's debt
 * and the sliding window's delay (max_delay_ms) are drawn once more on their
 * own: among every kind, too few sequences reach them for a twin that
 * misplaces one to be caught.
 */
import { after, before, test } from 'node:test'
import type { LimitKind } from '../../src/algorithms/algorithm.js'
import { KINDS } from '../../src/algorithms/kinds/index.js'
import { SLIDING_WINDOW_KIND } from '../../src/algorithms/kinds/sliding-window/kind.js'
import { TOKEN_BUCKET_KIND } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { runDifferential } from '../helpers/differential.js'
import { startCluster, type RedisCluster } from '../helpers/redis-servers.js'

let cluster: RedisCluster
before(async () => {
  cluster = await startCluster()
})
after(async () => {
  await cluster?.stop()
})

test('memory, shared memory, Redis, Redis Cluster and PostgreSQL give the same outcomes and values for random request sequences of every kind', async () => {
  await runDifferential([...KINDS.values()], 40, { clusterUrl: cluster.url })
})

test('the same for token buckets in debt (max_delay_ms): every limit allows a wait, its burst small enough for a sequence to reach the bound', async () => {
  const [rate, , wait] = TOKEN_BUCKET_KIND.sample.params
  const inDebt: LimitKind = {
    ...TOKEN_BUCKET_KIND,
    sample: { ...TOKEN_BUCKET_KIND.sample, params: [rate!, { min: 1, max: 5, integer: true }, { ...wait!, min: 1 }] },
  } as LimitKind
  await runDifferential([inDebt], 30, { clusterUrl: cluster.url })
})

test('the same for sliding windows with a delay (max_delay_ms): limits small enough for a sequence to pass them, held in this window and the next', async () => {
  const [, windowS, delay] = SLIDING_WINDOW_KIND.sample.params
  const held: LimitKind = {
    ...SLIDING_WINDOW_KIND,
    sample: { ...SLIDING_WINDOW_KIND.sample, params: [{ min: 1, max: 6, integer: true }, windowS!, { ...delay!, min: 1 }] },
  } as LimitKind
  await runDifferential([held], 30, { clusterUrl: cluster.url })
})
