/**
 * Time a thread spent ready to run while the machine's other work had the CPU:
 * the run-queue wait of /proc/<pid>/schedstat (its second field, ns), for a
 * process's main thread. On a loaded 2-core machine this is what stretches a
 * wall-clock measurement beyond the work measured, so a latency bound can
 * take it off and stay a bound on the work. Where /proc has no schedstat it
 * reads 0 (the bound stays strict).
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
  /** Ms of run-queue wait from the last sample at or before `from` to the first at or after `to` (epoch ms): at least the wait in between. */
  during(from: number, to: number): number
}

/**
 * The run-queue wait of other processes (`pids()`, asked again at each
 * sample: processes come and go), summed, sampled every few ms while this
 * one waits on them. A process counts from its first sample on.
 */
export function runQueueWait(pids: () => number[]): RunQueueWait {
  const at: number[] = []
  const total: number[] = []
  const last = new Map<number, number>()
  let sum = 0
  const read = (): void => {
    for (const pid of pids()) {
      const ms = runQueueMs(pid)
      sum += Math.max(0, ms - (last.get(pid) ?? ms))
      last.set(pid, ms)
    }
    at.push(Date.now())
    total.push(sum)
  }
  read()
  const timer = setInterval(read, 5)
  return {
    stop() {
      clearInterval(timer)
      read()
    },
    during(from, to) {
      let i = 0
      while (i + 1 < at.length && at[i + 1]! <= from) i++
      let j = at.length - 1
      while (j > i && at[j - 1]! >= to) j--
      return total[j]! - total[i]!
    },
  }
}
