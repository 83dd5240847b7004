/**
 * Load and probes for store fault tests (the shapes of redis-faults.test.ts):
 * CLIENTS loops of requests with fresh users, an exactness probe (a fresh
 * user's burst of 5 passes, the 6th is 429), the gateway's run-queue wait and
 * the VM's steal time, so that a latency bound on the gateway's clock counts
 * only the time the gateway had the CPU it asked for.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import type { Pool } from 'undici'
import { waitFor } from './wait.js'

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
export const quantile = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? 0

/** CPU time the hypervisor took from this VM so far (steal column of /proc/stat), in 10 ms ticks; 0 where unknown. */
export function stealTicks(): number {
  try {
    return Number(readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/)[8] ?? 0)
  } catch {
    return 0
  }
}

export interface Sample {
  /** Start, epoch ms. */
  at: number
  ms: number
  status: number
  reason: string | undefined
}

/** `clients` loops of requests, each with a fresh user (so a healthy store allows them), until stop(). */
export function load(pool: Pool, clients: number): { samples: Sample[]; stop(): Promise<void> } {
  const samples: Sample[] = []
  let running = true
  let n = 0
  const loop = async (): Promise<void> => {
    while (running) {
      const at = Date.now()
      const t0 = performance.now()
      const r = await pool.request({ path: '/load', method: 'GET', headers: { 'x-user': `load-${n++}` } })
      await r.body.dump()
      samples.push({ at, ms: performance.now() - t0, status: r.statusCode, reason: r.headers['x-fairvisor-reason'] as string | undefined })
    }
  }
  const loops = Array.from({ length: clients }, loop)
  return {
    samples,
    async stop() {
      running = false
      await Promise.all(loops)
    },
  }
}

/**
 * `rounds` × `clients` requests of fresh users at once on /warm (not the load's
 * path), answers not judged: the gateway's code paths are compiled and its
 * connections in use before a phase is measured.
 */
export async function warmUp(pool: Pool, clients: number, rounds = 5): Promise<void> {
  for (let r = 0; r < rounds; r++)
    await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        const res = await pool.request({ path: '/warm', method: 'GET', headers: { 'x-user': `warm-${r}-${i}` } })
        await res.body.dump()
      }),
    )
}

/** One request as the gateway's access log has it: `end` epoch ms, `ms` request in → response finished. */
export interface Access {
  end: number
  ms: number
  status: number
}

/** The gateway's access log lines for `url`. */
export function accessOf(logs: { msg: string; [k: string]: unknown }[], url: string): Access[] {
  return logs
    .filter((x) => x.msg === 'access' && x.url === url)
    .map((x) => ({
      end: Date.parse(x.time as string),
      ms: x.ms as number,
      status: x.status as number,
      reason: x.reason as string | undefined,
    }))
}

/**
 * Before the fault, every request is allowed, except one whose store call
 * passed its deadline (503, fail-closed; the client sees its reason) while the gateway
 * and the store together waited for a CPU (`waited`) for all but 10 ms of the
 * call's timer: the loaded machine's doing, not the store's.
 */
export function assertHealthy(requests: Access[], timerMs: number, waited: (from: number, to: number) => number, detail: string): void {
  const refused = requests.filter((r) => r.status !== 200).map((r) => ({ ...r, waited: waited(r.end - r.ms, r.end) }))
  const list = refused.map((r) => `${r.status} after ${r.ms.toFixed(1)} ms (${r.waited.toFixed(1)} waiting for a CPU)`)
  assert.ok(
    refused.every((r) => r.status === 503 && r.waited >= timerMs - 10),
    `healthy phase all allowed, but for store calls past their deadline while the machine had no CPU for them: ${list.join('; ')}: ${detail}`,
  )
}

/** Sequential requests of one fresh user on a burst-5 bucket: the first 5 pass, the 6th is 429. */
export async function exact(pool: Pool, user: string): Promise<boolean> {
  const codes: number[] = []
  for (let i = 0; i < 6; i++) {
    const r = await pool.request({ path: '/exact', method: 'GET', headers: { 'x-user': user } })
    await r.body.dump()
    codes.push(r.statusCode)
  }
  return codes.join(',') === '200,200,200,200,200,429'
}

export async function waitExact(pool: Pool, label: string, withinMs: number): Promise<number> {
  const t0 = performance.now()
  let i = 0
  while (performance.now() - t0 < withinMs) {
    if (await exact(pool, `${label}-${i++}`)) return performance.now() - t0
    await sleep(20)
  }
  throw new Error(`limiting not exact within ${withinMs} ms of the restart`)
}

/**
 * A phase of the load: at least `minMs`, and until `count()` reaches `n` (a
 * loaded machine runs a phase longer rather than with fewer requests).
 */
export async function phase(minMs: number, count: () => number, n: number, what: string): Promise<void> {
  const t0 = performance.now()
  await waitFor(() => performance.now() - t0 >= minMs && count() >= n, what, 60_000)
}

/** A latency bound missed while the hypervisor took CPU from this VM: the gateway's clock says nothing then. */
export class MachineStall extends Error {}

/**
 * The outage window's latency bound, on the gateway's own times (access log:
 * `end` epoch ms, `ms` request in → response finished): every request within
 * `bound` once the run-queue wait of the gateway during it (`waited`, from
 * run-queue.ts) is taken off — time the gateway was ready to run and had no CPU is the machine's, not
 * the gateway's. Still missed while the VM lost CPU to steal (`stolen` ticks)
 * → MachineStall (measure again); missed without → the assertion fails.
 */
export function assertWithinBound(
  requests: { end: number; ms: number }[],
  bound: number,
  waited: (from: number, to: number) => number,
  stolen: number,
  detail: string,
): void {
  const f = (x: number): string => x.toFixed(1)
  const over = requests.map((r) => ({ ms: r.ms, waited: waited(r.end - r.ms, r.end) })).filter((r) => r.ms - r.waited > bound)
  const list = over.map((r) => `${f(r.ms)} (${f(r.waited)} waiting for a CPU)`).join(', ')
  if (over.length > 0 && stolen > 0)
    throw new MachineStall(
      `${over.length} requests over ${f(bound)} ms while the VM lost ${stolen * 10} ms of CPU to steal: ${list}: ${detail}`,
    )
  assert.ok(
    over.length === 0,
    `${over.length} requests over ${f(bound)} ms of gateway time less its run-queue wait (${list}; no CPU steal in the window): ${detail}`,
  )
}

/** Runs a scenario again (at most four more times) only when the VM itself lost CPU during it. */
export async function measuredAgainOnStall(label: string, scenario: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await scenario()
    } catch (err) {
      if (!(err instanceof MachineStall) || attempt === 5) throw err
      console.log(`${label}: attempt ${attempt} discarded: ${err.message}`)
    }
  }
}
