/**
 * The documentation can be navigated and its quick start is true:
 * - README.md stays short (≤ 250 lines): the details live in docs/;
 * - every relative link of README.md and docs/*.md names a file that exists,
 *   and every #anchor a heading of that file (GitHub's slugs);
 * - every docs/*.md page is at most two clicks from README.md;
 * - the quick start names files that exist, starts a gateway that really
 *   limits, and its test command is `npm test` (what CI runs);
 * - the systemd unit sets only settings the gateway reads and starts the
 *   CLI that the build produces.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, test } from 'node:test'
import { ROOT, startBackend, startGateway } from '../helpers/processes.js'
import { settingsRead } from '../helpers/settings-names.js'

const README = join(ROOT, 'README.md')
const DOCS = join(ROOT, 'docs')
const pages = [
  README,
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(DOCS, f)),
]
const read = (file: string): string => readFileSync(file, 'utf8')
const rel = (file: string): string => relative(ROOT, file)

/** The text outside fenced code blocks, and without inline code spans (a `[x](y)` there is not a link). */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '')
}

/** GitHub's anchor of a heading: lower-cased, punctuation but `-` and `_` dropped, spaces → `-`, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>()
  const seen = new Map<string, number>()
  const outsideCode = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '')
  for (const m of outsideCode.matchAll(/^#{1,6} +(.+?) *#* *$/gm)) {
    const base = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

interface Link {
  from: string
  target: string
  /** The file it points at (absolute), or undefined for an anchor in the same file. */
  file: string
  anchor: string | undefined
}

function links(file: string): Link[] {
  const out: Link[] = []
  for (const m of prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // http:, https:, mailto: …
    const [path, anchor] = target.split('#', 2) as [string, string | undefined]
    out.push({ from: file, target, file: path === '' ? file : normalize(join(dirname(file), decodeURIComponent(path))), anchor })
  }
  return out
}

describe('README.md', () => {
  const text = read(README)

  test('is at most 250 lines', () => {
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
    assert.ok(lines <= 250, `README.md has ${lines} lines: move details into docs/`)
  })

  const quickStart = text.slice(text.indexOf('## Quick start'), text.indexOf('\n## ', text.indexOf('## Quick start') + 1))
  const commands = [...quickStart.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!)

  test('the quick start names files that exist', () => {
    assert.ok(commands.length >= 2, 'the quick start has its shell blocks')
    const files = [...commands.join('\n').matchAll(/FAIRVISOR_CONFIG_FILE=(\S+)/g)].map((m) => m[1]!)
    assert.ok(files.length >= 1, 'the quick start starts the gateway on a bundle')
    for (const f of files) assert.ok(existsSync(join(ROOT, f)), `${f} (README quick start) does not exist`)
  })

  test('its test command is `npm test`, the one CI runs', () => {
    const steps = commands
      .flatMap((c) => c.split('\n'))
      .flatMap((l) => l.split('&&'))
      .map((s) => s.trim())
    assert.ok(steps.includes('npm test'), 'the quick start runs `npm test`')
    assert.ok(!steps.some((s) => /^npm (run )?test\b/.test(s) && s !== 'npm test'), 'the test command is exactly `npm test`')
    assert.equal(JSON.parse(read(join(ROOT, 'package.json'))).scripts.test, 'node test/run.mjs')
    assert.match(read(join(ROOT, '.ci/run')), /^npm test$/m, '.ci/run runs the README test command')
  })

  test('the quick-start gateway starts on the sample bundle and limits: a burst of 10, then 429', async () => {
    const file = [...commands.join('\n').matchAll(/FAIRVISOR_CONFIG_FILE=(\S+)/g)][0]![1]!
    const backend = await startBackend((_q, s) => s.end('hello from the backend\n'))
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file })
    try {
      await gw.waitForLog((l) => l.msg === 'bundle applied')
      // The README's loop of 15, sent at once so that a loaded machine's slowness refills no more than a token or two.
      const codes = await Promise.all(
        Array.from({ length: 15 }, async () => {
          const r = await fetch(`${gw.url}/anything`)
          await r.arrayBuffer()
          return r.status
        }),
      )
      const allowed = codes.filter((c) => c === 200).length
      assert.ok(allowed >= 10 && allowed < 15, `a burst of 10 passes, not all 15: ${codes.join(' ')}`)
      assert.ok(
        codes.every((c) => c === 200 || c === 429),
        codes.join(' '),
      )
    } finally {
      await gw.stop()
      await backend.close()
    }
  })
})

describe('links of README.md and docs/*.md', () => {
  test('every relative link names an existing file, and every anchor a heading of it', () => {
    const problems: string[] = []
    for (const page of pages) {
      for (const l of links(page)) {
        if (!existsSync(l.file)) {
          problems.push(`${rel(page)}: ${l.target}: no such file`)
          continue
        }
        if (l.anchor !== undefined && l.file.endsWith('.md') && !anchors(read(l.file)).has(l.anchor)) {
          problems.push(`${rel(page)}: ${l.target}: no heading with that anchor in ${rel(l.file)}`)
        }
      }
    }
    assert.deepEqual(problems, [])
  })

  test('every docs/*.md page is at most two clicks from README.md', () => {
    const depth = new Map<string, number>([[README, 0]])
    let frontier = [README]
    for (let d = 1; d <= 2; d++) {
      const next: string[] = []
      for (const page of frontier) {
        for (const l of links(page)) {
          if (!l.file.endsWith('.md') || depth.has(l.file) || !existsSync(l.file) || !statSync(l.file).isFile()) continue
          depth.set(l.file, d)
          next.push(l.file)
        }
      }
      frontier = next
    }
    const far = pages.filter((p) => !depth.has(p)).map(rel)
    assert.deepEqual(far, [], 'pages more than two clicks from README.md')
  })
})

describe('deploy/systemd/fairvisor.service', () => {
  const unit = read(join(ROOT, 'deploy/systemd/fairvisor.service'))
  const value = (key: string): string[] => [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((m) => m[1]!)

  test('sets only settings the gateway reads', () => {
    const known = settingsRead()
    const set = value('Environment').map((e) => e.slice(0, e.indexOf('=')))
    assert.ok(set.includes('FAIRVISOR_CONFIG_FILE'))
    for (const name of set.filter((n) => n.startsWith('FAIRVISOR_'))) assert.ok(known.has(name), `${name} is not a setting the code reads`)
  })

  test('starts the built CLI from its working directory with `serve`', () => {
    const [dir] = value('WorkingDirectory')
    const [exec] = value('ExecStart')
    const [node, cli, command] = exec!.split(' ')
    assert.match(node!, /^\/usr\/bin\/node$/)
    assert.ok(cli!.startsWith(`${dir}/`), 'ExecStart runs the CLI inside WorkingDirectory')
    assert.ok(existsSync(join(ROOT, cli!.slice(dir!.length + 1))), `${cli} is not what the build produces`)
    assert.equal(command, 'serve')
    assert.equal(value('RestartPreventExitStatus')[0], '2', 'a bad setting (exit 2) is not restarted')
  })
})
