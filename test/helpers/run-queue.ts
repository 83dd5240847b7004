/**
 * Time a thread spent ready to run while the machine's other work had the CPU:
 * the run-queue wait of /proc/<pid>/schedstat (its second field, ns), for a
 * process's main thread. On a loaded 2-core machine this is what stretches a
 * wall-clock measurement beyond the work measured, so a latency bound can
 * take it off and stay a bound on the work. Where /proc has no schedstat it
 * reads 0 (the bound stays strict).
 *
 * The kernel adds a wait to that counter only when it ends, when the thread
 * next gets a CPU. A wait still going on at the end of a measured stretch is
 * therefore not in a reading taken then, and it is exactly the wait that made
 * a store call miss its deadline: the 503 goes out while Redis still waits
 * for a CPU, and Redis' counter shows that wait only once Redis runs again.
 * runQueueWait keeps sampling after the stretch and counts such a wait, but
 * only the part of it that can lie inside the stretch.
 */
import { readFileSync } from 'node:fs'

/** The main thread's run-queue wait so far, in ms (this process's by default); 0 when unknown. */
export function runQueueMs(pid = process.pid): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6
  } catch {
    return 0
  }
}

/** A process and its children (a PostgreSQL cluster: the postmaster and its backends). */
export function withChildren(pid: number): number[] {
  try {
    return [pid, ...readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)]
  } catch {
    return [pid]
  }
}

export interface RunQueueWait {
  stop(): void
  /**
   * Ms of run-queue wait of the processes within [from, to] (epoch ms), at most: per
   * process, the waits that ended between two samples, each counted only for the part
   * that can overlap the stretch, and no more than the stretch itself; summed over the
   * processes. A wait that ends after `to` counts once a later sample has it.
   */
  during(from: number, to: number): number
}

/** One reading of a process: taken between `t0` and `t1` (epoch ms), its wait so far `ms`. */
interface Reading {
  t0: number
  t1: number
  ms: number
}

/**
 * The part of the waits that ended between readings `a` and `b` (`d` ms in all) that
 * can lie within [from, to]: they ended after a.t0 and by b.t1, so at most b.t1 − from
 * of them is after `from`, and when a.t0 is past `to` only one of them can reach back
 * before `to`, by at most d − (a.t0 − to).
 */
export function overlapMs(a: Reading, b: Reading, from: number, to: number): number {
  const d = b.ms - a.ms
  if (d <= 0) return 0
  return Math.max(0, Math.min(d, b.t1 - from, a.t0 > to ? d - (a.t0 - to) : d))
}

/**
 * The run-queue wait of other processes (`pids()`, asked again at each
 * sample: processes come and go), sampled every few ms while this one waits
 * on them. A process counts from its first sample on.
 */
export function runQueueWait(pids: () => number[]): RunQueueWait {
  const readings = new Map<number, Reading[]>()
  const read = (): void => {
    for (const pid of pids()) {
      const t0 = Date.now()
      const ms = runQueueMs(pid)
      const t1 = Date.now()
      const rs = readings.get(pid) ?? readings.set(pid, []).get(pid)!
      rs.push({ t0, t1, ms })
    }
  }
  read()
  const timer = setInterval(read, 5)
  return {
    stop() {
      clearInterval(timer)
      read()
    },
    during(from, to) {
      let sum = 0
      for (const rs of readings.values()) {
        let own = 0
        for (let i = 1; i < rs.length; i++) if (rs[i]!.t1 > from) own += overlapMs(rs[i - 1]!, rs[i]!, from, to)
        sum += Math.min(own, to - from)
      }
      return sum
    },
  }
}
