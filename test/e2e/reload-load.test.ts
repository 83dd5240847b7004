/**
 * Reloads under traffic: a client sends ~2,000 requests/s through the real
 * gateway for ~6 s while the bundle is replaced 20 times (valid, invalid and
 * stale versions, in-place / rename / delete-and-recreate). No request may
 * fail or see a 5xx; every response carries the limit of a valid version
 * (never of an invalid or stale file); the reload metric counts each kind;
 * the final limit is that of the last valid version.
 *
 * CPU-heavy: run under `flock /tmp/fv-heavy.lock`.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { test } from 'node:test'
import { Pool } from 'undici'
import { startBackend, startGateway } from '../helpers/processes.js'

const RATE = 2000 // requests per second
const DURATION_MS = 6000
const MAX_IN_FLIGHT = 128

/** Every version's burst is distinct, so RateLimit-Limit tells which file a response was decided by. */
const burstOf = (version: number, stale = false): number => (stale ? 2_000_000 : 1_000_000) + version

function bundle(version: number, burst: number): string {
  return JSON.stringify({
    bundle_version: version,
    policies: [
      {
        id: 'api',
        spec: {
          selector: { pathPrefix: '/' },
          rules: [
            { name: 'everyone', limit_keys: [], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 1_000_000, burst } },
          ],
        },
      },
    ],
  })
}

type Kind = 'valid' | 'invalid_json' | 'invalid_schema' | 'stale'
// 20 replacements: 10 valid (versions 2..11), 5 invalid, 5 stale.
const PLAN: Kind[] = [
  'valid',
  'invalid_json',
  'valid',
  'stale',
  'valid',
  'invalid_schema',
  'stale',
  'valid',
  'valid',
  'invalid_json',
  'valid',
  'stale',
  'valid',
  'invalid_schema',
  'valid',
  'stale',
  'invalid_json',
  'valid',
  'stale',
  'valid',
]

test(`~${RATE} requests/s for ${DURATION_MS / 1000} s while the bundle is replaced ${PLAN.length} times`, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fv-reload-load-'))
  const file = join(dir, 'bundle.json')
  writeFileSync(file, bundle(1, burstOf(1)))
  const backend = await startBackend()
  const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
  const pool = new Pool(gw.url, { connections: MAX_IN_FLIGHT, pipelining: 1 })
  try {
    const statuses = new Map<number, number>()
    const limitsSeen = new Map<string, number>()
    let failures = 0
    let firstFailure = ''
    let sent = 0
    let answered = 0
    let inFlight = 0
    const one = async (): Promise<void> => {
      inFlight++
      try {
        const r = await pool.request({ path: '/work', method: 'GET' })
        await r.body.dump()
        statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1)
        const limit = String(r.headers['ratelimit-limit'])
        limitsSeen.set(limit, (limitsSeen.get(limit) ?? 0) + 1)
        answered++
      } catch (err) {
        failures++
        firstFailure ||= (err as Error).message
      } finally {
        inFlight--
      }
    }

    // Paced client: every 10 ms, send what the schedule owes (bounded in flight).
    const t0 = performance.now()
    const pending = new Set<Promise<void>>()
    const load = (async () => {
      while (performance.now() - t0 < DURATION_MS) {
        const owed = Math.floor(((performance.now() - t0) / 1000) * RATE) - sent
        for (let i = 0; i < owed && inFlight < MAX_IN_FLIGHT; i++) {
          sent++
          const p = one()
          pending.add(p)
          void p.finally(() => pending.delete(p))
        }
        await new Promise((r) => setTimeout(r, 10))
      }
      await Promise.all(pending)
    })()

    // Replacements, spread over the run; each waits for the gateway's reload log line
    // so every file is judged on its own (none is coalesced into the next by the debounce).
    const reloadLines = (): number =>
      gw.logs.filter((l) => l.msg === 'bundle applied' || l.result === 'invalid' || l.result === 'not_monotonic').length
    let version = 1
    let lastValid = 1
    const expected = { applied: 1, invalid: 0, not_monotonic: 0 }
    const validBursts = new Set([String(burstOf(1))])
    const delays: number[] = []
    /** Requests answered between one replacement and the next (the last: until the load ends). */
    const during: number[] = []
    await new Promise((r) => setTimeout(r, 300))
    for (const [i, kind] of PLAN.entries()) {
      let text: string
      if (kind === 'valid') {
        version++
        lastValid = version
        text = bundle(version, burstOf(version))
        validBursts.add(String(burstOf(version)))
        expected.applied++
      } else if (kind === 'stale') {
        text = bundle(version - (i % 2), burstOf(version, true)) // equal to or below the loaded version
        expected.not_monotonic++
      } else if (kind === 'invalid_json') {
        text = bundle(version + 100, burstOf(version, true)).slice(0, 60)
        expected.invalid++
      } else {
        text = JSON.stringify({ bundle_version: version + 100, policies: 'none' })
        expected.invalid++
      }
      const before = reloadLines()
      const w0 = performance.now()
      during.push(answered)
      if (i % 3 === 0) writeFileSync(file, text)
      else if (i % 3 === 1) {
        writeFileSync(`${file}.tmp`, text)
        renameSync(`${file}.tmp`, file)
      } else {
        unlinkSync(file)
        writeFileSync(file, text)
      }
      while (reloadLines() === before) {
        // A missing reload line fails, a late one does not (a loaded machine has taken 0.7 s).
        if (performance.now() - w0 > 20_000) throw new Error(`replacement ${i} (${kind}) not seen within 20 s`)
        await new Promise((r) => setTimeout(r, 5))
      }
      delays.push(performance.now() - w0)
      await new Promise((r) => setTimeout(r, Math.max(0, (DURATION_MS - 1000) / PLAN.length - (performance.now() - w0))))
    }
    await load
    const elapsedS = (performance.now() - t0) / 1000
    during.push(answered)
    const perReplacement = during.slice(1).map((n, i) => n - during[i]!)

    const total = [...statuses.values()].reduce((a, b) => a + b, 0)
    const detail = `sent ${sent} in ${elapsedS.toFixed(2)} s (${Math.round(sent / elapsedS)}/s), answered after each replacement ${perReplacement.join(' ')}, statuses ${JSON.stringify([...statuses])}, failures ${failures} ${firstFailure}, reload delays max ${Math.round(Math.max(...delays))} ms, limits seen ${JSON.stringify([...limitsSeen])}`
    console.log(detail)
    assert.equal(failures, 0, detail)
    assert.deepEqual([...statuses.keys()], [200], detail)
    assert.equal(total, sent)
    // The reloads happened under traffic: requests were answered after each replacement, before the next
    // (how many depends on what the machine can do besides; a rate would judge the machine).
    assert.ok(
      perReplacement.every((n) => n > 0),
      `traffic after every replacement: ${detail}`,
    )
    for (const limit of limitsSeen.keys())
      assert.ok(validBursts.has(limit), `RateLimit-Limit ${limit} is not that of a valid version: ${detail}`)

    const metrics = await (await fetch(`${gw.url}/metrics`)).text()
    for (const [result, n] of Object.entries(expected)) {
      assert.match(metrics, new RegExp(`^fairvisor_config_reload_total\\{result="${result}"\\} ${n}$`, 'm'), `${result}: ${n}`)
    }
    const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as { policy_version: number }
    assert.equal(ready.policy_version, lastValid)
    const last = await pool.request({ path: '/work', method: 'GET' })
    await last.body.dump()
    assert.equal(last.headers['ratelimit-limit'], String(burstOf(lastValid)))
  } finally {
    await pool.close()
    await gw.stop()
    await backend.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
