/**
 * docs/tutorial-first-policy.md works as written:
 * - its files (`<!-- tutorial:file PATH -->` + a block) and commands (`<!-- tutorial:run -->` + a
 *   ```sh block) run in order in one bash, in an empty directory, `npx fairvisor` being the
 *   built CLI (the tutorial runs in a checkout; here npx must not reach the registry), and each
 *   `<!-- tutorial:output -->` block is exactly what the command before it printed;
 * - its gateway steps hold with the real gateway: in shadow alice's 7 requests all pass and each
 *   would-be reject is logged as the page shows; after the page's edit the running gateway
 *   reloads version 2 and refuses past her burst;
 * - every JSON bundle docs/policies.md shows loads with `fairvisor validate`.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, CLI, type GatewayProcess, ROOT, startBackend, startGateway } from '../helpers/processes.js'

const PAGE = readFileSync(join(ROOT, 'docs/tutorial-first-policy.md'), 'utf8')

type Step = { kind: 'file'; path: string; text: string } | { kind: 'run'; text: string; output?: string }

/** The page's marked blocks, in order; an output block belongs to the run before it. */
function steps(): Step[] {
  const out: Step[] = []
  for (const m of PAGE.matchAll(/<!-- tutorial:(file|run|output) ?([^ ]*) -->\n```[a-z]*\n([\s\S]*?)```/g)) {
    const [, kind, path, text] = m as unknown as [string, string, string, string]
    if (kind === 'file') out.push({ kind: 'file', path, text })
    else if (kind === 'run') out.push({ kind: 'run', text })
    else {
      const last = out.at(-1)
      assert.ok(last?.kind === 'run' && last.output === undefined, 'an output block follows a run block')
      last.output = text
    }
  }
  return out
}

/**
 * The shell the page's commands run in: `npx fairvisor` is this checkout's CLI, any other npx
 * refused; `node` (the CLI's and the page's own) is the one running these tests.
 */
const PREAMBLE = `set -euo pipefail
node() { ${JSON.stringify(process.execPath)} "$@"; }
npx() { if [ "$1" = fairvisor ]; then shift; node ${JSON.stringify(CLI)} "$@"; else echo "npx $1: not run here" >&2; return 127; fi; }
`

/** Runs the steps in `dir`: one bash, so exports and functions carry over; each run's output apart. */
function runAll(dir: string, list: Step[]): { outputs: string[]; vars: Record<string, string> } {
  let script = PREAMBLE
  list.forEach((s, i) => {
    if (s.kind === 'file') {
      mkdirSync(join(dir, dirname(s.path)), { recursive: true })
      script += `cat > ${JSON.stringify(s.path)} <<'TUTORIAL_FILE_EOF'\n${s.text}TUTORIAL_FILE_EOF\n`
    } else script += `echo "@@step ${i}@@"\n${s.text}`
  })
  script += 'echo "@@vars@@"; printf "%s\\n" "FREE=$FREE" "FAIRVISOR_JWT_HMAC_SECRET=$FAIRVISOR_JWT_HMAC_SECRET"\n'
  const r = spawnSync('bash', ['-c', script], { cwd: dir, encoding: 'utf8', timeout: 60000, env: { PATH: process.env.PATH, HOME: dir } })
  assert.equal(r.status, 0, `the tutorial's commands failed (exit ${r.status}):\n${r.stderr}\n${r.stdout}`)
  const parts = r.stdout.split(/^@@(step \d+|vars)@@\n/m)
  const outputs: string[] = []
  for (let i = 1; i < parts.length; i += 2) if (parts[i]!.startsWith('step')) outputs[Number(parts[i]!.slice(5))] = parts[i + 1]!
  const vars = Object.fromEntries(
    parts
      .at(-1)!
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  )
  return { outputs, vars }
}

describe('docs/tutorial-first-policy.md, command by command', () => {
  const list = steps()
  let run: ReturnType<typeof runAll>
  const dirs: string[] = []
  before(() => {
    dirs.push(mkdtempSync(join(tmpdir(), 'fv-tutorial-')))
    run = runAll(dirs[0]!, list)
  })
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  test('has its bundle, commands and outputs marked', () => {
    assert.ok(list.some((s) => s.kind === 'file' && s.path.endsWith('bundle.json')))
    assert.ok(list.filter((s) => s.kind === 'run' && s.output !== undefined).length >= 3)
    for (const cmd of ['validate', 'test'])
      assert.ok(
        list.some((s) => s.kind === 'run' && s.text.includes(`npx fairvisor ${cmd}`)),
        cmd,
      )
  })

  test('every command runs, and prints exactly the output the page shows', () => {
    list.forEach((s, i) => {
      if (s.kind === 'run' && s.output !== undefined) assert.equal(run.outputs[i], s.output, `output of:\n${s.text}`)
    })
  })

  describe('the gateway steps, with the real gateway', () => {
    let backend: Backend
    let gw: GatewayProcess
    let dir: string
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'fv-tutorial-gw-'))
      dirs.push(dir)
      const file = list.find((s) => s.kind === 'file')!
      mkdirSync(join(dir, dirname(file.path)), { recursive: true })
      writeFileSync(join(dir, file.path), (file as { text: string }).text)
      backend = await startBackend((_q, s) => s.end('hello\n'))
      gw = await startGateway({
        FAIRVISOR_BACKEND_URL: backend.url,
        FAIRVISOR_CONFIG_FILE: join(dir, file.path),
        FAIRVISOR_JWT_HMAC_SECRET: run.vars.FAIRVISOR_JWT_HMAC_SECRET,
      })
      await gw.waitForLog((l) => l.msg === 'bundle applied')
    })
    after(async () => {
      await gw?.stop()
      await backend?.close()
    })

    /** Alice's loop of the page, sent at once so that a slow machine refills no token meanwhile. */
    async function alicesLoop(): Promise<Response[]> {
      const rs = await Promise.all(
        Array.from({ length: 7 }, () => fetch(`${gw.url}/api/items`, { headers: { authorization: `Bearer ${run.vars.FREE}` } })),
      )
      for (const r of rs) await r.arrayBuffer()
      return rs
    }
    /** The answers the page shows after a loop, from its `# 200 …` comment lines, in order. */
    const shown = [...PAGE.matchAll(/^# ((?:\d{3} ?)+)$/gm)].map((m) => m[1]!.trim().split(' '))

    test('shadow: every request passes, and each would-be reject is logged as the page shows', async () => {
      assert.deepEqual(shown[0], Array(7).fill('200'))
      const rs = await alicesLoop()
      assert.deepEqual(
        rs.map((r) => r.status),
        Array(7).fill(200),
      )
      const doc = JSON.parse(/^\{"level":"info","event":"would_reject".*\}$/m.exec(PAGE)![0]) as Record<string, unknown>
      const line = await gw.waitForLog((l) => l.event === 'would_reject')
      for (const [k, v] of Object.entries(doc)) assert.equal(line[k], v, `would_reject line: ${k}`)
    })

    test("enforce: the page's edit is reloaded by the running gateway, and alice gets her burst, then 429", async () => {
      const edit = list.find((s) => s.kind === 'run' && s.text.startsWith('sed -i'))
      assert.ok(edit)
      const r = spawnSync('bash', ['-c', edit.text.split('\n')[0]!], { cwd: dir, encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      await gw.waitForLog((l) => l.msg === 'bundle applied' && l.version === 2)
      assert.deepEqual(shown[1], ['200', '200', '200', '200', '200', '429', '429'])
      const rs = await alicesLoop()
      const allowed = rs.filter((x) => x.status === 200).length
      // Her burst of 5; a sixth only if the machine took a second to send seven.
      assert.ok(allowed === 5 || allowed === 6, rs.map((x) => x.status).join(' '))
      for (const x of rs.filter((y) => y.status !== 200)) {
        assert.equal(x.status, 429)
        assert.equal(x.headers.get('x-fairvisor-reason'), 'token_bucket_exceeded')
        assert.ok(x.headers.get('retry-after') && x.headers.get('ratelimit-remaining') === '0')
      }
    })
  })
})

test('every JSON bundle docs/policies.md shows loads with `fairvisor validate`', () => {
  const page = readFileSync(join(ROOT, 'docs/policies.md'), 'utf8')
  const bundles = [...page.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.includes('"bundle_version"'))
  assert.ok(bundles.length >= 1, 'policies.md shows a bundle')
  for (const b of bundles) {
    const r = spawnSync(process.execPath, [CLI, 'validate', '-'], { input: b, encoding: 'utf8', timeout: 10000 })
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`)
    assert.doesNotMatch(r.stdout, /^warning:/m, 'and draws no warning')
  }
})
