// The store contract on a standalone Redis (127.0.0.1:6379, shared: every key
// of this run carries a unique rule-name prefix and is deleted afterwards).
import { RedisStore } from '../../src/store/redis/store.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import type { Store } from '../../src/store/store.js'
import { runStoreContract } from './contract.js'
import { deleteKeys } from '../helpers/redis-servers.js'

const URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `ct-${process.pid}-${Date.now().toString(36)}`

runStoreContract(
  'redis',
  async () => {
    const s = new RedisStore({ target: parseRedisUrl(URL), timeoutMs: 1000 })
    if (!(await s.ready(3000))) throw new Error(`no Redis at ${URL}`)
    return s
  },
  {
    serverClock: true,
    prefix,
    async keyExists(store: Store, key: string) {
      return (await (store as RedisStore).client.command(['EXISTS', key])) === 1
    },
    cleanup: () => deleteKeys(URL, `tb:${prefix}-*`),
  },
)
