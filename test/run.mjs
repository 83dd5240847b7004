// Test entry point (`npm test`): build, then run every test/**/*.test.ts with
// node's test runner, one file at a time (the e2e suites time real traffic and
// must not compete for the two cores). Extra args filter files by substring.
import { execFileSync, spawnSync } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

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
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-reporter=spec', ...files], {
  stdio: 'inherit',
})
process.exit(r.status ?? 1)
