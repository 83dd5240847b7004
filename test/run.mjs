// Test entry point (`npm test`): build, then run every test/**/*.test.ts with
// node's test runner. Extra args filter files by substring.
//
// Which files run at the same time: a timing-free file runs beside another
// timing-free file (as many at once as there are cores), before the rest; every
// other file runs alone, one at a time, since it times real traffic or a clock.
// Timing-free: a file under test/unit, test/docs, test/property or test/deploy
// whose text names no clock or timer (CLOCK below) and does not drive stores
// on real time (helpers/differential). Such a file has nothing a neighbour's CPU
// use can make late, so the rule holds whatever its assertions.
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'

const TIMING_FREE_DIRS = ['test/unit/', 'test/docs/', 'test/property/', 'test/deploy/']
const CLOCK = /performance\.now|Date\.now|hrtime|setTimeout|setInterval|sleep|timers\/promises|waitFor|helpers\/differential/
const timingFree = (file) => TIMING_FREE_DIRS.some((d) => file.startsWith(d)) && !CLOCK.test(readFileSync(file, 'utf8'))

function find(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (name === 'bench' || name === 'fixtures' || name === 'node_modules') continue
    if (statSync(p).isDirectory()) out.push(...find(p))
    else if (name.endsWith('.test.ts')) out.push(p)
  }
  return out.sort()
}

// --tests-only: the tests alone, on the build already in dist/ (.ci/run's second Node version).
const testsOnly = process.argv.includes('--tests-only')
console.log(`node ${process.version}${testsOnly ? ', tests only' : ''}`)
if (!testsOnly) {
  // Lint and format check first (Biome, `npm run lint`): a style slip fails in a second, before the long suites.
  execFileSync(process.execPath, ['node_modules/@biomejs/biome/bin/biome', 'check', 'src', 'test', 'biome.json'], { stdio: 'inherit' })
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'], { stdio: 'inherit' })
  // tsx strips types without checking them: type-check the tests and benchmarks too, so a wrong call fails here.
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'test/tsconfig.json', '--noEmit'], { stdio: 'inherit' })
}
const filters = process.argv.slice(2).filter((a) => a !== '--tests-only')
const files = find('test').filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
if (files.length === 0) {
  console.error('no test files matched')
  process.exit(1)
}
const run = (list, concurrency) =>
  list.length === 0
    ? 0
    : (spawnSync(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...list], {
        stdio: 'inherit',
      }).status ?? 1)
const free = files.filter(timingFree)
const timed = files.filter((f) => !timingFree(f))
console.log(`${free.length} timing-free files, ${availableParallelism()} at a time; then ${timed.length} files one at a time`)
const seconds = (t0) => `${Math.round((performance.now() - t0) / 1000)} s`
let t0 = performance.now()
const a = run(free, availableParallelism())
if (free.length > 0) console.log(`timing-free files: ${seconds(t0)}`)
t0 = performance.now()
const b = run(timed, 1)
if (timed.length > 0) console.log(`files one at a time: ${seconds(t0)}`)
process.exit(a || b)
