/**
 * Limits stay exact across gateway instances: two gateway processes
 * share one Redis (then one 3-master Redis Cluster); 64 keep-alive clients,
 * split across them, hammer one key of a `burst 10, tokens_per_second 10`
 * bucket for 3 s (and 1000 requests). The backend must see at most 10 + 10 ×
 * elapsed requests and no fewer than 10 + 10 × (last request sent − first
 * answer) − 2 (test/helpers/shared-limit.ts). Heavy: run under `flock /tmp/fv-heavy.lock`.
 */
import { describe, it } from 'node:test'
import { hammerSharedKey } from '../helpers/shared-limit.js'
import { startCluster, startRedis } from '../helpers/redis-servers.js'

const CLIENTS = 64
const DURATION_MS = 3000
const hammer = (url: string): Promise<void> =>
  hammerSharedKey({ env: { FAIRVISOR_STORE: url }, clients: CLIENTS, durationMs: DURATION_MS, minTotal: 1000 })

describe('two gateways share one limit', () => {
  it(`standalone Redis: ${CLIENTS} clients on one key for ${DURATION_MS / 1000} s stay within [10 + 10 × (last sent − first answer) − 2, 10 + 10 × elapsed]`, async () => {
    const redis = await startRedis()
    try {
      await hammer(redis.url)
    } finally {
      await redis.stop()
    }
  })

  it(`Redis Cluster (3 masters): the same bound`, async () => {
    const cluster = await startCluster()
    try {
      await hammer(cluster.url)
    } finally {
      await cluster.stop()
    }
  })
})
