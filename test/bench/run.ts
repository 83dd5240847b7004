/**
 * `npm run bench -- <name> [args…]` runs test/bench/<name>.bench.ts with the
 * remaining arguments (after building dist/, which the benchmarks start), in a
 * child process so each benchmark is its own process tree. Without a name it
 * lists the benchmarks. Run under the shared lock on a shared machine:
 * `flock /tmp/fv-heavy.lock npm run bench -- proxy`.
 */
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'

const dir = import.meta.dirname
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .map((f) => f.slice(0, -'.bench.ts'.length))
  .sort()
const [name, ...args] = process.argv.slice(2)
if (name === undefined || !names.includes(name)) {
  console.error(`usage: npm run bench -- <${names.join('|')}> [args…]`)
  process.exit(name === undefined ? 0 : 2)
}
const root = join(dir, '../..')
const build = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.json')], {
  stdio: 'inherit',
})
if (build.status !== 0) process.exit(build.status ?? 1)
const r = spawnSync(process.execPath, ['--import', 'tsx', join(dir, `${name}.bench.ts`), ...args], { stdio: 'inherit' })
process.exit(r.status ?? 1)
