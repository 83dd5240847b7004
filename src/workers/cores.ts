/** FAIRVISOR_WORKERS' default: the cores this process may use, bounded by a cgroup v2 CPU quota when one is set. */
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'

/** Whole CPUs of a cgroup v2 `cpu.max` line ("200000 100000"; "max 100000": no quota), rounded up; undefined when unbounded or unreadable. */
export function quotaCpus(cpuMax: string): number | undefined {
  const [quota, period] = cpuMax.trim().split(/\s+/)
  const q = Number(quota)
  const p = Number(period)
  if (quota === 'max' || !(q > 0) || !(p > 0)) return undefined
  return Math.max(1, Math.ceil(q / p))
}

export function defaultWorkers(cpuMaxFile = '/sys/fs/cgroup/cpu.max'): number {
  let quota: number | undefined
  try {
    quota = quotaCpus(readFileSync(cpuMaxFile, 'utf8'))
  } catch {
    quota = undefined // no cgroup v2 file: the cores the OS reports
  }
  return Math.max(1, Math.min(availableParallelism(), quota ?? Infinity))
}
