/**
 * BundleSource on real files: a reload never lowers protection silently (a
 * bundle with a failing policy is refused whole once one is loaded, and its
 * version is not consumed); at start-up the valid policies load and every
 * dropped one is an error; with a signing key only signed bundles load; the
 * accepted bytes build the same bundle again (what a worker thread runs),
 * whatever the file holds by then.
 */
import assert from 'node:assert/strict'
import { createHash, createHmac } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { BundleSource, buildAccepted, type ReloadReport } from '../../../src/bundle/source.js'
import { signBundle, verifySigned } from '../../../src/bundle/signature.js'
import { loadSettings } from '../../../src/settings.js'

const NOW = Date.UTC(2026, 0, 15)
const dir = mkdtempSync(join(tmpdir(), 'fv-source-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const policy = (id: string, burst = 5): object => ({
  id,
  spec: {
    selector: { pathPrefix: '/' },
    rules: [{ name: `r_${id}`, limit_keys: ['ip:address'], algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 1, burst } }],
  },
})
const BAD = { id: 'x', spec: { rules: 'nope' } }
const good = (version: number): string =>
  JSON.stringify({ bundle_version: version, policies: ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => policy(id)) })

function source(name: string, text: string | Buffer, signingKey?: string): { src: BundleSource; file: string; reports: ReloadReport[] } {
  const file = join(dir, name)
  writeFileSync(file, text)
  const src = new BundleSource(file, () => NOW, { signingKey })
  const reports: ReloadReport[] = []
  src.onReload((r) => reports.push(r))
  return { src, file, reports }
}

describe('a reload never lowers protection silently', () => {
  test('a 6-policy bundle replaced by a schema-invalid one: refused whole, every problem named, version not consumed', () => {
    const { src, file } = source('six.json', good(2))
    assert.equal(src.reload().result, 'applied')
    writeFileSync(file, JSON.stringify({ bundle_version: 3, policies: [BAD] }))
    const r = src.reload()
    assert.equal(r.result, 'invalid')
    assert.equal(src.current!.version, 2)
    assert.equal(src.current!.policies.length, 6, 'the last good bundle stays')
    assert.deepEqual(r.errors.slice(0, 2), [
      `${file}: /policies/0/spec/selector: policy "x": selector is required but missing.`,
      `${file}: /policies/0/spec/rules: policy "x": rules must be an array, not "nope".`,
    ])
    assert.equal(r.errors[2], `${file}: bundle_version 3 refused whole: 2 errors in its policies; the loaded bundle_version 2 stays`)
    // The fixed file may carry the same version: the refused one did not raise the floor.
    writeFileSync(file, good(3))
    const fixed = src.reload()
    assert.equal(fixed.result, 'applied')
    assert.equal(src.current!.version, 3)
  })

  test('one bad policy among good ones is enough to refuse a reload', () => {
    const { src, file } = source('one-bad.json', good(1))
    src.reload()
    writeFileSync(
      file,
      JSON.stringify({
        bundle_version: 2,
        policies: [policy('a', 9), { id: 'm', spec: { selector: { pathPrefix: '/' }, mode: 'monitor', rules: [] } }],
      }),
    )
    const r = src.reload()
    assert.equal(r.result, 'invalid')
    assert.match(r.errors[0]!, /\/policies\/1\/spec\/mode: policy "m": mode must be one of/)
    assert.equal(src.current!.version, 1)
  })

  test('at start-up (nothing to keep) the valid policies load and each dropped one is an error', () => {
    const { src, file, reports } = source('startup.json', JSON.stringify({ bundle_version: 4, policies: [policy('a'), BAD] }))
    const r = src.reload()
    assert.equal(r.result, 'applied')
    assert.deepEqual(
      src.current!.policies.map((p) => p.id),
      ['a'],
    )
    assert.deepEqual(r.errors, [
      `${file}: /policies/1/spec/selector: policy "x": selector is required but missing.`,
      `${file}: /policies/1/spec/rules: policy "x": rules must be an array, not "nope".`,
    ])
    assert.deepEqual(r.warnings, [], 'a dropped policy is an error, not a warning')
    assert.deepEqual(reports, [r])
  })
})

describe('the accepted bytes: the bundle a worker builds', () => {
  test('the same bundle (version, hash, load time, policies dropped at start-up) whatever the file holds since', () => {
    const { src, file } = source('accepted.json', JSON.stringify({ bundle_version: 4, policies: [policy('a'), BAD, policy('b', 9)] }))
    const first = src.reload()
    assert.equal(first.result, 'applied')
    assert.equal(first.errors.length, 2, 'the bad policy dropped at start-up')
    const built = buildAccepted(src.accepted!)
    assert.deepEqual(
      [built.version, built.hash, built.loadedAt, built.policies.map((p) => p.id)],
      [4, src.current!.hash, src.current!.loadedAt, ['a', 'b']],
    )
    // Validation's findings travel with the bytes: a worker drops the same policy without validating again.
    assert.deepEqual(
      [...new Set(src.accepted!.issues.filter((i) => !i.warning).map((i) => i.policyIndex))],
      [1],
      'the findings name the dropped policy',
    )
    // Without them the bad policy reaches the compiler: nothing validates the bytes a second time.
    assert.throws(() => buildAccepted({ ...src.accepted!, issues: [] }), TypeError)
    // Refused, older, broken: the accepted bytes stay those of the bundle in force.
    for (const [text, result] of [
      [JSON.stringify({ bundle_version: 5, policies: [policy('c'), BAD] }), 'invalid'],
      [good(3), 'not_monotonic'],
      ['{"bundle_version": 9, "policies": [', 'invalid'],
    ] as const) {
      writeFileSync(file, text)
      assert.equal(src.reload().result, result)
      const again = buildAccepted(src.accepted!)
      assert.deepEqual([again.version, again.hash, again.policies.length], [4, built.hash, 2])
    }
  })

  test('built with the load time of the accept: an expiry passed since changes nothing', () => {
    const expires = new Date(NOW + 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')
    const { src } = source('expiring.json', JSON.stringify({ bundle_version: 1, expires_at: expires, policies: [policy('a')] }))
    assert.equal(src.reload().result, 'applied')
    assert.equal(src.accepted!.now, NOW)
    assert.equal(buildAccepted(src.accepted!).version, 1)
  })

  test('the bytes in force read again are `unchanged`, not a refusal', () => {
    const { src, reports } = source('same.json', good(7))
    src.reload()
    const r = src.reload()
    assert.deepEqual([r.result, r.version, r.errors], ['unchanged', 7, []])
    assert.equal(reports.length, 2)
  })
})

describe('signed bundles', () => {
  const KEY = 'k'.repeat(16) + 'e'.repeat(16)
  const body = Buffer.from(good(1))

  test('the signed form is the base64 HMAC-SHA256 of the rest, then the bundle unchanged', () => {
    const signed = signBundle(body, KEY)
    const nl = signed.indexOf(0x0a)
    assert.equal(signed.subarray(0, nl).toString(), createHmac('sha256', KEY).update(body).digest('base64'))
    assert.ok(signed.subarray(nl + 1).equals(body))
    const v = verifySigned(signed, KEY)
    assert.ok(v.ok && v.body.equals(body))
  })

  test('with a key, a signed bundle loads and its hash is the SHA-1 of the whole file', () => {
    const signed = signBundle(body, KEY)
    const { src } = source('signed.json', signed, KEY)
    assert.equal(src.reload().result, 'applied')
    assert.equal(src.current!.hash, createHash('sha1').update(signed).digest('base64'))
  })

  test('with a key, the accepted signed bytes build again under the key (a worker has the same settings)', () => {
    const signed = signBundle(body, KEY)
    const { src } = source('signed-accepted.json', signed, KEY)
    assert.equal(src.reload().result, 'applied')
    assert.equal(buildAccepted(src.accepted!, { signingKey: KEY }).hash, createHash('sha1').update(signed).digest('base64'))
  })

  test('a signature line ending in CRLF is accepted', () => {
    const signed = signBundle(body, KEY)
    const nl = signed.indexOf(0x0a)
    const crlf = Buffer.concat([signed.subarray(0, nl), Buffer.from('\r\n'), body])
    assert.equal(source('crlf.json', crlf, KEY).src.reload().result, 'applied')
  })

  for (const [name, bytes, want] of [
    ['unsigned', body, /bundle_signature_missing: .*unsigned bundle/],
    ['tampered', Buffer.from(signBundle(body, KEY).toString().replace('"burst":5', '"burst":500')), /bundle_signature_invalid/],
    ['signed with another key', signBundle(body, 'x'.repeat(32)), /bundle_signature_invalid/],
    ['empty', Buffer.alloc(0), /bundle_signature_missing/],
    ['a garbage first line', Buffer.concat([Buffer.from('not-a-signature\n'), body]), /bundle_signature_missing: .*not a base64/],
  ] as const) {
    test(`with a key, a ${name} file is refused on reload; the last good bundle stays`, () => {
      const { src, file } = source(`refused-${name.replace(/ /g, '-')}.json`, signBundle(Buffer.from(good(1)), KEY), KEY)
      assert.equal(src.reload().result, 'applied')
      writeFileSync(file, bytes)
      const r = src.reload()
      assert.equal(r.result, 'invalid')
      assert.match(r.errors[0]!, want)
      assert.ok(r.errors[0]!.startsWith(`${file}: /: `), r.errors[0])
      assert.equal(src.current!.version, 1)
    })
  }

  test('without a key a signed file is not JSON: the key is what enables the signed form', () => {
    const { src } = source('signed-nokey.json', signBundle(body, KEY))
    const r = src.reload()
    assert.equal(r.result, 'invalid')
    assert.match(r.errors[0]!, /not valid JSON/)
  })

  test('FAIRVISOR_BUNDLE_SIGNING_KEY: a short key stops start-up naming the variable', () => {
    assert.throws(
      () => loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1', FAIRVISOR_BUNDLE_SIGNING_KEY: 'short' }),
      /FAIRVISOR_BUNDLE_SIGNING_KEY: is 5 characters long/,
    )
    assert.equal(loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1', FAIRVISOR_BUNDLE_SIGNING_KEY: KEY }).bundleSigningKey, KEY)
    assert.equal(loadSettings({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:1' }).bundleSigningKey, undefined)
  })
})
