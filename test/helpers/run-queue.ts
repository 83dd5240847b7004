/**
 * Time a thread spent ready to run while the machine's other work had the CPU:
 * the run-queue wait of /proc/<pid>/schedstat (its second field, ns), for a
 * process's main thread. On a loaded 2-core machine this is what stretches a
 * wall-clock measurement beyond the work measured, so a latency bound can
 * take it off and stay a bound on the work. Where /proc has no schedstat it
 * reads 0 (the bound stays strict).
 */
import { readFileSync } from 'node:fs'

/** The main thread's run-queue wait so far, in ms (this process's by default). */
export function runQueueMs(pid = process.pid): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6
  } catch {
    return 0
  }
}

/**
 * Another process's run-queue wait, sampled every few ms (the process runs
 * while this one waits on it). `during(from, to)` (epoch ms): the wait from
 * the last sample at or before `from` to the first at or after `to`, so at
 * least the wait in between.
 */
export function runQueueWait(pid: number): { stop(): void; during(from: number, to: number): number } {
  const at: number[] = []
  const waited: number[] = []
  const read = (): void => {
    at.push(Date.now())
    waited.push(runQueueMs(pid))
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
      return waited[j]! - waited[i]!
    },
  }
}
