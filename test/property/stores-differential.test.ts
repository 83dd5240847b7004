/**
 * Differential property test: the limit maths exists three times (TypeScript
 * for the in-process stores, Lua for Redis, PL/pgSQL for PostgreSQL). Random
 * sequences of (limit, cost, time step) of every kind in the kind table run
 * against the memory, shared-memory, Redis and PostgreSQL stores must give
 * the same outcomes and values (test/helpers/differential.ts says within
 * what tolerance). A kind added to the table is drawn here as it is, from
 * its own `sample`: nothing to edit in this file. The token bucket's debt
 * (max_delay_ms) is drawn once more on its own: among every kind, too few
 * sequences reach the debt's bound for a twin that misplaces it to be caught.
 */
import { test } from 'node:test'
import type { LimitKind } from '../../src/algorithms/algorithm.js'
import { KINDS } from '../../src/algorithms/kinds/index.js'
import { TOKEN_BUCKET_KIND } from '../../src/algorithms/kinds/token-bucket/kind.js'
import { runDifferential } from '../helpers/differential.js'

test('memory, shared memory, Redis and PostgreSQL give the same outcomes and values for random request sequences of every kind', async () => {
  await runDifferential([...KINDS.values()], 40)
})

test('the same for token buckets in debt (max_delay_ms): every limit allows a wait, its burst small enough for a sequence to reach the bound', async () => {
  const [rate, , wait] = TOKEN_BUCKET_KIND.sample.params
  const inDebt: LimitKind = {
    ...TOKEN_BUCKET_KIND,
    sample: { ...TOKEN_BUCKET_KIND.sample, params: [rate!, { min: 1, max: 5, integer: true }, { ...wait!, min: 1 }] },
  } as LimitKind
  await runDifferential([inDebt], 30)
})
