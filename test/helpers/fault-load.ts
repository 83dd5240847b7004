/**
 * Load and probes for store fault tests (the shapes of redis-faults.test.ts):
 * CLIENTS loops of requests with fresh users, an exactness probe (a fresh
 * user's burst of 5 passes, the 6th is 429), and the VM's steal time, so a
 * latency bound is not judged while the hypervisor had the CPU.
 */
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import type { Pool } from 'undici'

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
export const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? 0

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
