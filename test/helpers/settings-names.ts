/**
 * The FAIRVISOR_* settings the code reads, for the tests that keep the
 * deploy files and docs/configuration.md true to the code: every name
 * src/settings*.ts parse, plus any read straight from process.env elsewhere.
 */
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { CLI, ROOT } from './processes.js'

function sources(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...sources(p))
    else if (name.endsWith('.ts')) out.push(p)
  }
  return out
}

export function settingsRead(): Set<string> {
  const names = new Set<string>()
  for (const name of readdirSync(join(ROOT, 'src')).filter((f) => /^settings.*\.ts$/.test(f)))
    for (const m of readFileSync(join(ROOT, 'src', name), 'utf8').match(/FAIRVISOR_[A-Z0-9_]*[A-Z0-9]/g) ?? []) names.add(m)
  for (const file of sources(join(ROOT, 'src'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/process\.env(?:\.|\[['"])(FAIRVISOR_[A-Z0-9_]*[A-Z0-9])/g)) names.add(m[1]!)
  }
  return names
}

/** The settings table `fairvisor --help` prints: name → default. */
export function settingsHelp(): Map<string, string> {
  const r = spawnSync(process.execPath, [CLI, '--help'], { cwd: ROOT, encoding: 'utf8', timeout: 10000 })
  if (r.status !== 0) throw new Error(`fairvisor --help exited ${r.status}: ${r.stderr}`)
  const out = new Map<string, string>()
  for (const m of r.stdout.matchAll(/^ {2}(FAIRVISOR_[A-Z0-9_]+) +.*\(default: (.*)\)$/gm)) out.set(m[1]!, m[2]!)
  return out
}
