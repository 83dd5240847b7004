/**
 * One bundle for every worker thread (FAIRVISOR_WORKERS=2) from the very
 * start: the supervisor arms its watch before the first worker starts and
 * hands each worker the bundle it accepted.
 * - a bundle written at any moment of start-up (from the spawn to just after
 *   /readyz first answers 200) is in force in every worker within 2 s, and
 *   /readyz and fairvisor_config_info report it (20 starts);
 * - SIGHUP 100 ms after the spawn is a reload, not a death (one thread and
 *   workers).
 * The worker that answered a request is read from its access log line.
 */
import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { freePort, metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { type Answer, ask, bundleFile, readyz, removeBundleFiles, sleep, V1, V2 } from '../helpers/worker-bundles.js'

let backend: Backend
before(async () => {
  backend = await startBackend()
})
after(async () => {
  await backend.close()
  removeBundleFiles()
})

let probes = 0
/** A request and the worker that answered it (from its access log line). */
async function probe(gw: GatewayProcess): Promise<Answer & { worker: number }> {
  const path = `/p?probe=${++probes}`
  const answer = await ask(gw.port, path)
  const line = await gw.waitForLog((l) => l.msg === 'access' && l.url === path, 10_000)
  return { ...answer, worker: line.worker as number }
}

/** When /readyz on `port` first answers 200 (polled from the spawn: the port is fixed). */
async function firstReady(port: number, exited: () => boolean): Promise<number> {
  for (;;) {
    if (exited()) throw new Error('the gateway exited before /readyz answered 200')
    const ok = await readyz(port).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ok) return performance.now()
    await sleep(5)
  }
}

/** When to write v2: `ms` after the spawn, or `ms` after /readyz first answered 200. */
type Moment = { after: 'spawn' | 'ready'; ms: number }

/**
 * Start a 2-worker gateway on v1, write v2 at `moment`, and return how long
 * after both the write and the start every worker answered with v2 (or what
 * they answered, when that took over `withinMs`).
 */
async function startAndWrite(
  moment: Moment,
  replaceByRename: boolean,
  withinMs: number,
): Promise<{ ms?: number; late?: string; startMs: number }> {
  const file = bundleFile(V1)
  const port = await freePort()
  let spawnedAt = 0
  let ready: Promise<number> = Promise.resolve(0)
  let written: Promise<number> = Promise.resolve(0)
  const onSpawn = (p: ChildProcess): void => {
    spawnedAt = performance.now()
    ready = firstReady(port, () => p.exitCode !== null || p.signalCode !== null)
    written = (async () => {
      const base = moment.after === 'spawn' ? spawnedAt : await ready
      await sleep(base + moment.ms - performance.now())
      // In place or by rename: both ways a deploy replaces a file.
      if (!replaceByRename) writeFileSync(file, V2)
      else {
        writeFileSync(`${file}.tmp`, V2)
        renameSync(`${file}.tmp`, file)
      }
      return performance.now()
    })()
  }
  const env = { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_WORKERS: '2', FAIRVISOR_PORT: String(port) }
  const gw = await startGateway({ ...env, FAIRVISOR_ACCESS_LOG: 'true' }, { timeoutMs: 30_000, onSpawn })
  try {
    const startMs = (await ready) - spawnedAt
    // The clock starts once both happened: the write, and the gateway listening.
    const from = Math.max(await written, performance.now())
    const onV2 = new Set<number>()
    const seen: string[] = []
    while (onV2.size < 2 && performance.now() - from <= withinMs) {
      for (const a of await Promise.all(Array.from({ length: 6 }, () => probe(gw)))) {
        seen.push(`worker ${a.worker}: ${a.limit ?? a.status} at ${Math.round(performance.now() - from)} ms`)
        if (a.limit === '2000') onV2.add(a.worker)
        else onV2.delete(a.worker)
      }
    }
    if (onV2.size < 2) return { startMs, late: `v2 written ${moment.ms} ms after ${moment.after}: ${seen.slice(-8).join(', ')}` }
    const ms = performance.now() - from
    // Every worker on v2: no answer, nor /readyz, nor the metric says anything else.
    const rest = await Promise.all(Array.from({ length: 12 }, () => probe(gw)))
    assert.deepEqual(new Set(rest.map((a) => a.limit)), new Set(['2000']), JSON.stringify(rest))
    for (let k = 0; k < 4; k++) assert.deepEqual(await readyz(gw.port), { status: 200, version: 2 })
    assert.equal(await metricValue(gw, 'fairvisor_config_info', 'version="2"'), 1)
    assert.equal(await metricValue(gw, 'fairvisor_config_info', 'version="1"'), undefined)
    return { startMs, ms }
  } finally {
    assert.equal(await gw.stop(), 0)
  }
}

describe('a bundle written while 2 workers start', () => {
  // Half the starts write v2 at a share of the last start's time to /readyz 200 (the supervisor reading the
  // bundle, the workers starting); the other half a few ms after /readyz first answered 200.
  const STARTS = 20
  const AFTER_READY_MS = [0, 5, 10, 20, 40, 80, 150, 300]
  const WITHIN_MS = 2000

  it(`is in force in every worker within ${WITHIN_MS} ms, and /readyz and fairvisor_config_info say v2 (${STARTS} starts)`, async () => {
    let startMs = 1500 // spawn to /readyz 200, measured anew each round
    const late: string[] = []
    const inForce: number[] = []
    const moment = (i: number): Moment =>
      i % 2 === 1
        ? { after: 'ready', ms: AFTER_READY_MS[(i >> 1) % AFTER_READY_MS.length]! }
        : { after: 'spawn', ms: Math.round(((i >> 1) / (STARTS / 2)) * startMs * 1.1) }
    // Two starts at a time (one of each kind of moment), so that the waits of one overlap the work of the other.
    for (let i = 0; i < STARTS; i += 2) {
      const round = await Promise.all([i, i + 1].map((k) => startAndWrite(moment(k), k % 4 >= 2, WITHIN_MS)))
      for (const [k, r] of round.entries()) {
        if (r.late !== undefined) late.push(`start ${i + k}: ${r.late}`)
        else inForce.push(r.ms!)
      }
      startMs = round[0]!.startMs
    }
    console.log(`v2 in force in both workers ${Math.round(Math.max(...inForce))} ms at most after the write and the start`)
    assert.deepEqual(late, [], `v2 not in force in every worker within ${WITHIN_MS} ms`)
  })
})

/** Whether process `pid` has a SIGHUP handler (Linux: SigCgt in /proc/<pid>/status); undefined where that cannot be read. */
function catchesHup(pid: number): boolean | undefined {
  try {
    const mask = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    return mask === undefined ? undefined : (BigInt(`0x${mask}`) & 1n) === 1n
  } catch {
    return undefined
  }
}

describe('SIGHUP 100 ms after the spawn', () => {
  for (const workers of ['1', '2']) {
    it(`FAIRVISOR_WORKERS=${workers}: the gateway starts and reloads once it can (bytes unchanged: info), never dies`, async () => {
      let spawnedAt = 0
      let sentAt = 0
      const send = async (p: ChildProcess): Promise<void> => {
        spawnedAt = performance.now()
        await sleep(100)
        // Node itself takes ~45 ms to run a first line here; on a machine loaded enough that it has not by 100 ms,
        // the signal goes as soon as the process has its handler (the gateway installs it before loading anything).
        // Today's gateway has one only once it listens: it dies, or reports the reload a failure.
        while (catchesHup(p.pid!) === false && performance.now() - spawnedAt < 10_000) await sleep(1)
        sentAt = performance.now()
        p.kill('SIGHUP')
      }
      const gw = await startGateway(
        { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile(V1), FAIRVISOR_WORKERS: workers },
        { timeoutMs: 30_000, onSpawn: (p) => void send(p) },
      )
      try {
        const listeningAt = performance.now()
        console.log(
          `SIGHUP sent ${Math.round(sentAt - spawnedAt)} ms after the spawn, ${Math.round(listeningAt - sentAt)} ms before listening`,
        )
        assert.ok(sentAt > 0 && sentAt < listeningAt, 'the signal came while the gateway started')
        const reload = await gw.waitForLog((l) => l.result === 'unchanged')
        assert.equal(reload.level, 'info')
        assert.equal(gw.proc.exitCode, null)
        assert.equal(gw.proc.signalCode, null)
        assert.deepEqual(await readyz(gw.port), { status: 200, version: 1 })
        assert.equal((await ask(gw.port, '/x')).limit, '1000')
        assert.equal(gw.logs.filter((l) => l.level === 'error' || l.level === 'fatal').length, 0, JSON.stringify(gw.logs))
      } finally {
        assert.equal(await gw.stop(), 0)
      }
    })
  }
})
