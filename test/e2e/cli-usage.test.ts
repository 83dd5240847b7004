/**
 * The CLI's command line through the real process: --help lists every command's
 * flags and every setting, anything unknown exits 2 instead of serving,
 * `version`, `sign` and `validate --key-file`.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { TEMPLATES } from '../../src/commands/init-templates.js'
import { CLI, ROOT } from '../helpers/processes.js'
import { settingsRead } from '../helpers/settings-names.js'

function cli(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  // A backend and a port are set so that a command line wrongly taken for `serve` would start listening (and time out).
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 10000,
    env: { PATH: process.env.PATH, FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:9', FAIRVISOR_PORT: '0', ...env },
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

const tmp = mkdtempSync(join(tmpdir(), 'fv-cli-usage-'))
after(() => rmSync(tmp, { recursive: true, force: true }))

describe('fairvisor --help', () => {
  const help = cli(['--help'])
  test('exits 0 and lists every command with its flags', () => {
    assert.equal(help.code, 0)
    for (const cmd of ['serve', 'validate', 'test', 'init', 'sign', 'version', 'help'])
      assert.match(help.stdout, new RegExp(`^  ${cmd}\\b`, 'm'), cmd)
    for (const flag of ['--format', '--key-file', '--requests', '--start', '--template', '--out', '--force'])
      assert.ok(help.stdout.includes(flag), flag)
    // Every template `init` accepts, the budget and agent ones included.
    const listed = /--template (\S+)/.exec(help.stdout)?.[1]?.split('|') ?? []
    assert.deepEqual([...listed].sort(), Object.keys(TEMPLATES).sort())
    for (const t of ['api', 'llm', 'webhook', 'budget', 'agent']) assert.ok(listed.includes(t), t)
  })
  test('lists every environment variable that src/settings*.ts read', () => {
    const names = settingsRead()
    assert.ok(names.size >= 25)
    for (const n of names) assert.match(help.stdout, new RegExp(`^  ${n} `, 'm'), n)
  })
})

test('an unknown flag, an unknown command or an argument to serve exits 2 and does not serve', () => {
  for (const args of [['--bogus'], ['--port=8080'], ['frobnicate'], ['serve', '--bogus'], ['version', 'x']]) {
    const r = cli(args)
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, /^fairvisor: .*\nrun fairvisor --help/, args.join(' '))
    assert.equal(r.stdout, '', 'nothing was started')
  }
})

test('version works as a command as well as --version and -v', () => {
  const v = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
  for (const a of ['version', '--version', '-v']) assert.deepEqual([cli([a]).code, cli([a]).stdout], [0, `${v.version}\n`], a)
})

describe('fairvisor sign and validate --key-file', () => {
  const keyFile = join(tmp, 'key')
  writeFileSync(keyFile, `${'k'.repeat(40)}\n`)
  const bundle = join(tmp, 'bundle.json')
  writeFileSync(bundle, readFileSync(join(ROOT, 'policies/quickstart.json')))
  const signed = join(tmp, 'bundle.signed')

  test('sign writes the signed form (to --out or stdout) and validate --key-file accepts it', () => {
    const r = cli(['sign', '--key-file', keyFile, bundle, '--out', signed])
    assert.equal(r.code, 0, r.stderr)
    const text = readFileSync(signed, 'utf8')
    assert.match(text, /^[A-Za-z0-9+/]{43}=\n\{/)
    assert.equal(text.slice(text.indexOf('\n') + 1), readFileSync(bundle, 'utf8'))
    assert.equal(cli(['sign', '--key-file', keyFile, bundle]).stdout, text)
    const v = cli(['validate', '--key-file', keyFile, signed])
    assert.equal(v.code, 0, v.stderr)
    assert.match(v.stdout, /signature: valid under the given key/)
  })

  test('validate --key-file refuses an unsigned or tampered file, or another key (exit 1)', () => {
    assert.match(cli(['validate', '--key-file', keyFile, bundle]).stderr, /bundle_signature_missing: .*unsigned bundle/)
    const tampered = join(tmp, 'tampered.signed')
    writeFileSync(tampered, readFileSync(signed, 'utf8').replace('"burst": 10', '"burst": 1000'))
    const t = cli(['validate', '--key-file', keyFile, tampered])
    assert.equal(t.code, 1)
    assert.match(t.stderr, /bundle_signature_invalid/)
    const other = join(tmp, 'other-key')
    writeFileSync(other, 'o'.repeat(32))
    assert.equal(cli(['validate', '--key-file', other, signed]).code, 1)
  })

  test('usage: sign needs --key-file and one bundle (exit 2); a short key or an invalid bundle is not signed (exit 1)', () => {
    assert.equal(cli(['sign', bundle]).code, 2)
    assert.equal(cli(['sign', '--key-file', keyFile]).code, 2)
    const short = join(tmp, 'short')
    writeFileSync(short, 'abc\n')
    assert.match(cli(['sign', '--key-file', short, bundle]).stderr, /holds 3 characters; a signing key has at least 32/)
    const bad = join(tmp, 'bad.json')
    writeFileSync(bad, JSON.stringify({ bundle_version: 1, policies: [{ id: 'x', spec: { rules: 'nope' } }] }))
    const r = cli(['sign', '--key-file', keyFile, bad])
    assert.equal(r.code, 1)
    assert.equal(r.stdout, '')
    assert.match(r.stderr, /not signed/)
  })
})

test('validate prints every error of a bundle, and says that a reload would refuse it whole', () => {
  const file = join(tmp, 'many.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 0,
      policies: [
        { id: 'x', spec: { rules: 'nope' } },
        { id: 'h', spec: { selector: { pathPrefix: '/', hosts: ['a/b'] }, rules: [] } },
      ],
    }),
  )
  const r = cli(['validate', file])
  assert.equal(r.code, 1)
  assert.equal(r.stderr.split('\n').filter((l) => l.startsWith('error: ')).length, 4, r.stderr)
  const dropped = join(ROOT, 'test/fixtures/cli/dropped-policy.json')
  assert.match(cli(['validate', dropped]).stderr, /as a reload the gateway refuses this bundle whole and keeps the loaded one; at start-up/)
})

test('validate warns about a policy whose rules all need a JWT claim and that has no fallback_limit', () => {
  const file = join(tmp, 'jwt.json')
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        {
          id: 'u',
          spec: {
            selector: { pathPrefix: '/' },
            rules: [{ name: 'per_user', limit_keys: ['jwt:sub'], algorithm: 'token_bucket', algorithm_config: { rps: 1, burst: 1 } }],
          },
        },
      ],
    }),
  )
  const r = cli(['validate', file])
  assert.equal(r.code, 0)
  assert.match(r.stdout, /warning: .*policy "u": every rule needs a jwt: claim and the policy has no fallback_limit/)
})
