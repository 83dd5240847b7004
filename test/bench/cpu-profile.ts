/**
 * The hottest functions of a `node --cpu-prof` profile (share of busy self
 * time), for the benchmarks that run the gateway under FV_BENCH_PROFILE.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]
  samples: number[]
  timeDeltas: number[]
}

/** One line per function, `  12.3%  name file:line`, hottest first; every profile in `profileDir`. */
export function hotSpots(profileDir: string, top = 15): string[] {
  const out: string[] = []
  if (!existsSync(profileDir)) return out
  for (const file of readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'))) {
    const p = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile
    const byId = new Map(p.nodes.map((n) => [n.id, n]))
    const self = new Map<string, number>()
    let total = 0
    p.samples.forEach((id, i) => {
      const cf = byId.get(id)!.callFrame
      const key = `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${cf.lineNumber + 1}`
      const dt = p.timeDeltas[i] ?? 0
      if (cf.functionName === '(idle)') return // the gateway idles between runs: share of busy time only
      self.set(key, (self.get(key) ?? 0) + dt)
      total += dt
    })
    for (const [k, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
      out.push(`${((100 * t) / total).toFixed(1).padStart(5)}%  ${k}`)
  }
  return out
}
