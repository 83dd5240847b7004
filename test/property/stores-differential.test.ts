/**
 * Differential property test: the limit maths exists three times (TypeScript
 * for the in-process stores, Lua for Redis, PL/pgSQL for PostgreSQL). Random
 * sequences of (limit, cost, time step) of every kind in the kind table run
 * against the memory, shared-memory, Redis and PostgreSQL stores must give
 * the same outcomes and values (test/helpers/differential.ts says within
 * what tolerance). A kind added to the table is drawn here as it is, from
 * its own `sample`: nothing to edit in this file.
 */
import { test } from 'node:test'
import { KINDS } from '../../src/algorithms/kinds/index.js'
import { runDifferential } from '../helpers/differential.js'

test('memory, shared memory, Redis and PostgreSQL give the same outcomes and values for random request sequences of every kind', async () => {
  await runDifferential([...KINDS.values()], 40)
})
