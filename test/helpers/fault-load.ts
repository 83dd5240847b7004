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

/** A latency bound missed while the hypervisor took CPU from this VM: the gateway's clock says nothing then. */
export class MachineStall extends Error {}

/**
 * How long a process's main thread waited, ready to run, while the machine's
 * other work had the CPU: the run-queue wait of /proc/<pid>/schedstat (its
 * second field, ns), sampled every few ms. On a loaded 2-core machine this is
 * what stretches a request's time on the gateway's clock beyond the work it
 * does; where /proc has no schedstat it reads 0 (the bound stays strict).
 */
export function runQueueWait(pid: number): { stop(): void; during(from: number, to: number): number } {
  const at: number[] = []
  const waitedNs: number[] = []
  const read = (): void => {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1])
      at.push(Date.now())
      waitedNs.push(ns)
    } catch {
      // no schedstat (or the process is gone): nothing to add
    }
  }
  read()
  const timer = setInterval(read, 5)
  return {
    stop() {
      clearInterval(timer)
      read()
    },
    /** Ms of run-queue wait from the last sample at or before `from` to the first at or after `to` (epoch ms): at least the wait in between. */
    during(from, to) {
      if (at.length === 0) return 0
      let i = 0
      while (i + 1 < at.length && at[i + 1]! <= from) i++
      let j = at.length - 1
      while (j > i && at[j - 1]! >= to) j--
      return (waitedNs[j]! - waitedNs[i]!) / 1e6
    },
  }
}

/**
 * The outage window's latency bound, on the gateway's own times (access log:
 * `end` epoch ms, `ms` request in → response finished): every request within
 * `bound` once the run-queue wait of the gateway during it (`waited`) is taken
 * off — time the gateway was ready to run and had no CPU is the machine's, not
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
