// The store contract on a 3-master Redis Cluster this file starts and stops.
import { after, before } from 'node:test'
import { RedisClusterStore } from '../../src/store/redis/cluster.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import type { Store } from '../../src/store/store.js'
import { runStoreContract } from './contract.js'
import { startCluster, type RedisCluster } from '../helpers/redis-servers.js'

let cluster: RedisCluster
before(async () => {
  cluster = await startCluster()
})
after(async () => {
  await cluster?.stop()
})

runStoreContract(
  'redis-cluster',
  async () => {
    const s = new RedisClusterStore({ target: parseRedisUrl(cluster.url), timeoutMs: 1000 })
    if (!(await s.ready(5000))) throw new Error(`cluster at ${cluster.url} not ready`)
    return s
  },
  {
    serverClock: true,
    prefix: 'cl',
    async keyExists(store: Store, key: string) {
      return (await (store as RedisClusterStore).client.exists(key)) === 1
    },
  },
)
