/** The access-log lines `fairvisor test --access-log` reads (src/commands/test-access-log.ts): nginx combined and JSON lines. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import {
  parseCombined,
  parseJsonLine,
  parseLogLine,
  parseLogTime,
  parseRequestLine,
  parseTimeLocal,
  unescapeNginx,
} from '../../../src/commands/test-access-log.js'
import { LineError } from '../../../src/commands/test-samples.js'

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0)

describe("nginx's $time_local", () => {
  test('the offset is the zone the time is written in', () => {
    assert.equal(parseTimeLocal('10/Oct/2000:13:55:36 -0700'), Date.UTC(2000, 9, 10, 20, 55, 36))
    assert.equal(parseTimeLocal('01/Jan/2026:05:30:00 +0530'), T0)
    assert.equal(parseTimeLocal('01/Jan/2026:00:00:00 +0000'), T0)
    assert.equal(parseTimeLocal('31/Dec/2025:23:59:59 +0000'), T0 - 1000)
  })

  test('anything else is not a time', () => {
    for (const s of [
      '31/Feb/2026:00:00:00 +0000',
      '01/Foo/2026:00:00:00 +0000',
      '01/Jan/2026:24:00:00 +0000',
      '01/Jan/2026:00:60:00 +0000',
      '01/Jan/2026:00:00:00 +0060',
      '01/Jan/2026:00:00:00',
      '1/Jan/2026:00:00:00 +0000',
      '2026-01-01T00:00:00Z',
    ])
      assert.equal(parseTimeLocal(s), undefined, s)
  })
})

describe('a JSON line’s time', () => {
  test('ISO 8601 with an offset, epoch seconds (number or text, as $msec), epoch milliseconds, $time_local', () => {
    assert.equal(parseLogTime('2026-01-01T00:00:00Z'), T0)
    assert.equal(parseLogTime('2026-01-01T01:00:00.250+01:00'), T0 + 250)
    assert.equal(parseLogTime('2026-01-01T01:00:00+0100'), T0)
    assert.equal(parseLogTime(T0 / 1000), T0)
    assert.equal(parseLogTime(T0 / 1000 + 0.5), T0 + 500)
    assert.equal(parseLogTime(`${T0 / 1000}.500`), T0 + 500)
    assert.equal(parseLogTime(T0), T0)
    assert.equal(parseLogTime(String(T0)), T0)
    assert.equal(parseLogTime('01/Jan/2026:00:00:00 +0000'), T0)
  })

  test('a time without an offset (read in which zone?), a negative or non-finite number, other types: none', () => {
    for (const v of [
      '2026-01-01T00:00:00',
      '2026-01-01 00:00:00Z',
      '2026-13-01T00:00:00Z',
      'yesterday',
      '',
      -1,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      true,
      null,
      {},
    ])
      assert.equal(parseLogTime(v), undefined, String(v))
  })
})

test('nginx\'s escapes are undone: \\xHH as the byte (a latin1 character, as Node reads a request), \\" and \\\\', () => {
  assert.equal(unescapeNginx('a\\x22b'), 'a"b')
  assert.equal(unescapeNginx('/caf\\xC3\\xA9'), '/caf\u00c3\u00a9')
  assert.equal(unescapeNginx('say \\"hi\\" \\\\ ok'), 'say "hi" \\ ok')
  assert.equal(unescapeNginx('plain'), 'plain')
})

describe('the request line', () => {
  test('method, path and query; HTTP/0.9 has no version; an absolute-form target gives its host', () => {
    assert.deepEqual(parseRequestLine('GET /v1/x?a=1&b=2 HTTP/1.1'), { method: 'GET', path: '/v1/x?a=1&b=2' })
    assert.deepEqual(parseRequestLine('DELETE /x'), { method: 'DELETE', path: '/x' })
    assert.deepEqual(parseRequestLine('GET http://api.example.com/v1/x?a=1 HTTP/1.1'), {
      method: 'GET',
      host: 'api.example.com',
      path: '/v1/x?a=1',
    })
    assert.deepEqual(parseRequestLine('GET https://api.example.com HTTP/1.1'), { method: 'GET', host: 'api.example.com', path: '/' })
  })

  test('"-" (a connection closed before any request), "*", a TLS handshake on a plain port: not a request', () => {
    for (const r of ['-', '', 'OPTIONS * HTTP/1.1', 'CONNECT example.com:443 HTTP/1.1', '\u0016\u0003\u0001\u0000\u00a5\u0001'])
      assert.throws(() => parseRequestLine(r), LineError, JSON.stringify(r))
  })
})

describe('nginx combined', () => {
  test('a line of the default format: address, method, path and query, status, Referer and User-Agent; the host given', () => {
    const r = parseCombined(
      '203.0.113.7 - - [01/Jan/2026:00:00:05 +0000] "POST /v1/items?page=2 HTTP/1.1" 429 17 "https://app.example.com/" "Mozilla/5.0 (X11; Linux x86_64)"',
      'api.example.com',
    )
    assert.deepEqual(r, {
      time: T0 + 5000,
      fields: {
        method: 'POST',
        path: '/v1/items?page=2',
        host: 'api.example.com',
        headers: { referer: 'https://app.example.com/', 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64)' },
        ip: '203.0.113.7',
        status: 429,
      },
    })
  })

  test('"-" for Referer and User-Agent sends neither; a user with a space; IPv6; fields after the user agent are ignored', () => {
    const r = parseCombined(
      '2001:db8::1 - john doe [01/Jan/2026:00:00:00 +0000] "GET / HTTP/2.0" 200 - "-" "-" "198.51.100.1, 10.0.0.1" rt=0.002 uct="0.000"',
      'localhost',
    )
    assert.deepEqual(r.fields, { method: 'GET', path: '/', host: 'localhost', headers: {}, ip: '2001:db8::1', status: 200 })
  })

  test('escaped quotes inside a field (nginx \\x22, escape=json \\") stay inside it', () => {
    const a = parseCombined(
      '10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET /q?s=\\x22a\\x22 HTTP/1.1" 200 1 "-" "bot \\x22x\\x22/1.0"',
      'h',
    )
    assert.equal(a.fields.path, '/q?s="a"')
    assert.deepEqual(a.fields.headers, { 'user-agent': 'bot "x"/1.0' })
    const b = parseCombined('10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "say \\"hi\\""', 'h')
    assert.deepEqual(b.fields.headers, { 'user-agent': 'say "hi"' })
  })

  test('an absolute-form request line gives the host instead of the default', () => {
    const r = parseCombined('10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET http://a.example/x HTTP/1.1" 200 1 "-" "-"', 'localhost')
    assert.equal(r.fields.host, 'a.example')
    assert.equal(r.fields.path, '/x')
  })

  test('the common format (no Referer, no User-Agent), a bad time, a bad request, text: malformed, saying why', () => {
    const cases: [string, RegExp][] = [
      ['10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 1', /not in nginx's combined format/],
      [
        '10.0.0.1 - - [01/Jan/2026:00:00:00] "GET / HTTP/1.1" 200 1 "-" "-"',
        /the time \[01\/Jan\/2026:00:00:00\] is not nginx's \$time_local/,
      ],
      ['10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "-" 400 0 "-" "-"', /the request line "-" is not/],
      ['10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 2000 1 "-" "-"', /not in nginx's combined format/],
      ['garbage', /not in nginx's combined format/],
      ['', /not in nginx's combined format/],
    ]
    for (const [line, message] of cases)
      assert.throws(
        () => parseCombined(line, 'h'),
        (e: Error) => e instanceof LineError && message.test(e.message),
        line,
      )
  })
})

describe('JSON lines', () => {
  test('time, ip, method, path, headers, status; other fields ignored; the host given when the line has none', () => {
    const r = parseJsonLine(
      '{"time":"2026-01-01T00:00:01Z","ip":"10.0.0.1","method":"PUT","path":"/v1/x?a=1","headers":{"x-api-key":"k"},"status":201,"bytes":10,"upstream":"b1"}',
      'api.example.com',
    )
    assert.deepEqual(r, {
      time: T0 + 1000,
      fields: { ip: '10.0.0.1', headers: { 'x-api-key': 'k' }, method: 'PUT', path: '/v1/x?a=1', host: 'api.example.com', status: 201 },
    })
  })

  test("nginx's $request instead of method and path; a status as text (escape=json formats quote it)", () => {
    const r = parseJsonLine('{"time":"1767225600.250","ip":"10.0.0.1","request":"GET http://b.example/y HTTP/1.1","status":"404"}', 'h')
    assert.deepEqual(r, {
      time: T0 + 250,
      fields: { ip: '10.0.0.1', headers: undefined, method: 'GET', path: '/y', host: 'b.example', status: 404 },
    })
  })

  test('a host field, or a Host header in any case, wins over the default', () => {
    assert.equal(parseJsonLine('{"time":0,"ip":"1.1.1.1","path":"/","host":"x.example"}', 'h').fields.host, 'x.example')
    const r = parseJsonLine('{"time":0,"ip":"1.1.1.1","path":"/","headers":{"HOST":"y.example"}}', 'h')
    assert.equal(r.fields.host, undefined) // sampleOf reads the header
  })

  test('no time, a bad time, no ip, no path, not JSON, not an object: malformed, saying why', () => {
    const cases: [string, RegExp][] = [
      ['{"ip":"1.1.1.1","path":"/"}', /has no "time"/],
      ['{"time":"2026-01-01T00:00:00","ip":"1.1.1.1","path":"/"}', /"time" "2026-01-01T00:00:00" is not ISO 8601 with an offset/],
      ['{"time":0,"path":"/"}', /"ip" \(the client address\) must be a string/],
      ['{"time":0,"ip":"1.1.1.1"}', /has neither "path" nor "request"/],
      ['{"time":0,"ip":"1.1.1.1","request":"-"}', /the request line "-" is not/],
      ['{"time":0', /is not valid JSON/],
      ['[1]', /must be a JSON object/],
      ['null', /must be a JSON object/],
    ]
    for (const [line, message] of cases)
      assert.throws(
        () => parseJsonLine(line, 'h'),
        (e: Error) => e instanceof LineError && message.test(e.message),
        line,
      )
  })
})

test('parseLogLine picks the reader of the format', () => {
  const combined = '10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"'
  assert.equal(parseLogLine('nginx-combined', combined, 'h').time, T0)
  assert.throws(() => parseLogLine('json-lines', combined, 'h'), LineError)
  assert.equal(parseLogLine('json-lines', '{"time":0,"ip":"1.1.1.1","path":"/"}', 'h').time, 0)
})
