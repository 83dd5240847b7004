/**
 * The admin API's view with worker threads (src/workers/admin-gather.ts), on real worker threads that
 * answer as runtime/worker-thread.ts does: every live worker's part merged, the supervisor's reload
 * history added, the view posted back to the worker that asked; a worker that exits counts as empty.
 */
import assert from 'node:assert/strict'
import { Worker } from 'node:worker_threads'
import { after, test } from 'node:test'
import type { ThreadView } from '../../../src/observe/admin-view.js'
import { topEntries } from '../../../src/observe/space-saving.js'
import { AdminGather } from '../../../src/workers/admin-gather.js'
import type { FromWorker } from '../../../src/workers/messages.js'

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
parentPort.on('message', (m) => {
  if (m.type === 'admin-collect' && workerData.view) parentPort.postMessage({ type: 'admin-collected', id: m.id, view: workerData.view })
  else if (m.type === 'admin-view') parentPort.postMessage({ type: 'answer', view: m.view })
  else if (m.type === 'ask') parentPort.postMessage({ type: 'admin', id: 1 })
})`

const part = (key: string, count: number, allow: number): ThreadView => ({
  top: {
    entries: [{ item: { policy: 'api', rule: 'per_user', reason: 'token_bucket_exceeded', key, composite: key }, count, error: 0 }],
    floor: 0,
    total: count,
  },
  stats: { decisions: { allow, reject: count, shadow_reject: 0 }, rejects_by_reason: { token_bucket_exceeded: count } },
})

const workers: Worker[] = []
after(() => Promise.all(workers.map((w) => w.terminate())))
const reloads = [{ at: '2026-01-01T00:00:00.000Z', result: 'applied', version: '3' }]

function start(view: ThreadView | undefined, gather: () => AdminGather): Worker {
  const w = new Worker(WORKER, { eval: true, workerData: { view } })
  w.on('message', (m: FromWorker) => gather().onMessage(w, m))
  workers.push(w)
  return w
}

test('every live worker asked; their parts merged, with the reload history; the view goes back to the worker that asked', async () => {
  const live: Worker[] = []
  const gather = new AdminGather(
    () => live,
    () => reloads,
  )
  live.push(
    start(part('alice', 3, 10), () => gather),
    start(part('alice', 2, 5), () => gather),
    start(part('bob', 1, 0), () => gather),
  )
  const view = await gather.view()
  assert.deepEqual(
    topEntries(view.top, 5).map((e) => [e.item.key, e.count]),
    [
      ['alice', 5],
      ['bob', 1],
    ],
  )
  assert.deepEqual(view.stats.decisions, { allow: 15, reject: 6, shadow_reject: 0 })
  assert.deepEqual(view.reloads, reloads)
  const answer = new Promise<typeof view>((resolve) =>
    live[2]!.on('message', (m: { type: string; view: typeof view }) => m.type === 'answer' && resolve(m.view)),
  )
  live[2]!.postMessage({ type: 'ask' })
  assert.deepEqual(await answer, view)
})

test('a worker that exits before it answers counts as empty', async () => {
  const live: Worker[] = []
  const gather = new AdminGather(
    () => live,
    () => [],
  )
  const silent = start(undefined, () => gather)
  live.push(
    start(part('carol', 4, 1), () => gather),
    silent,
  )
  const pending = gather.view()
  await silent.terminate()
  gather.exited(silent)
  const view = await pending
  assert.deepEqual(
    view.top.entries.map((e) => e.item.key),
    ['carol'],
  )
  assert.equal(view.stats.decisions.allow, 1)
})
