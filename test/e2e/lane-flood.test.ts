/**
 * Pipelined floods on the client lane (src/http/lane-conn.ts), through the
 * real gateway process: thousands of requests in one write, answered at once
 * by an in-process reject, once nested a call frame per request and killed
 * the process (RangeError) within a 100 KB packet; a client that writes and
 * never reads must not make the gateway buffer answers without bound; and a
 * connection with a long pipeline must not keep another one waiting.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { parseAnswers } from '../helpers/lane-pair.js'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

/** One token per key, refilled too slowly to matter: a key's first request passes, the rest are rejected at once. */
const BUCKET = { tokens_per_second: 0.001, burst: 1 }
const REQ = 'GET /f HTTP/1.1\r\nHost: a\r\nX-User: flood\r\n\r\n'

let backend: Backend
let gw: GatewayProcess
let dir: string
before(async () => {
  backend = await startBackend()
  dir = mkdtempSync(join(tmpdir(), 'fv-lane-flood-'))
  gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: writeHeaderBucketBundle(dir, 'r', BUCKET) })
})
after(async () => {
  await gw.stop()
  await backend.close()
  rmSync(dir, { recursive: true, force: true })
})

const rssKb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1])
const open = async (): Promise<Socket> => {
  const s = connect({ port: gw.port, host: '127.0.0.1' })
  await once(s, 'connect')
  return s
}

/** Reads `s` until `n` answers have come (counted by their status lines); resolves with the bytes. */
function readAnswers(s: Socket, n: number, onCount?: (count: number) => void): Promise<Buffer> {
  const chunks: Buffer[] = []
  let count = 0
  // The last 8 bytes read: a status line (9 bytes) cut between reads is found whole, and never twice.
  let carry = ''
  return new Promise((resolve, reject) => {
    s.on('data', (d: Buffer) => {
      chunks.push(d)
      const text = carry + d.toString('latin1')
      count += text.split('HTTP/1.1 ').length - 1
      carry = text.slice(-8)
      onCount?.(count)
      if (count >= n) resolve(Buffer.concat(chunks))
    })
    s.on('close', () => reject(new Error(`closed after ${count} of ${n} answers; stderr: ${gw.stderr.join('\n')}`)))
  })
}

test('4,000 pipelined requests rejected at once, in one write: every one answered in order, the gateway lives', async () => {
  const n = 4000
  const s = await open()
  const read = readAnswers(s, n)
  s.write(REQ.repeat(n))
  const { answers } = parseAnswers(await read, [])
  s.destroy()
  assert.equal(answers.length, n)
  assert.deepEqual(
    answers.map((a) => a.status),
    [200, ...Array<number>(n - 1).fill(429)],
  )
  assert.equal(gw.proc.exitCode, null)
  assert.equal((await fetch(`${gw.url}/after`, { headers: { 'x-user': 'other' } })).status, 200)
})

test('a client that writes a flood and never reads: the gateway stops reading it (bounded memory), and serves others meanwhile', async () => {
  const s = await open()
  const chunk = Buffer.from(REQ.repeat(2000)) // 78 KB
  const base = rssKb(gw.proc.pid!)
  let written = 0
  // Written as long as the gateway takes it, up to 48 MB: 1.2 M answers (570 MB) if it read it all.
  let blocked = false
  while (written < 48 * 1024 * 1024) {
    written += chunk.length
    if (s.write(chunk)) continue
    // The gateway reads what the kernel holds; it stopped when no drain comes within a second of the last.
    const drained = await Promise.race([once(s, 'drain').then(() => true), new Promise<false>((r) => setTimeout(r, 1000, false))])
    if (!drained) {
      blocked = true
      break
    }
  }
  const grown = (rssKb(gw.proc.pid!) - base) / 1024
  console.log(`written ${(written / 1048576).toFixed(1)} MB before the gateway stopped reading; RSS +${grown.toFixed(1)} MB`)
  assert.ok(blocked, `the gateway read all ${written} bytes of a client that reads nothing`)
  assert.ok(grown < 64, `RSS grew ${grown.toFixed(1)} MB`)
  // Another connection is answered while the flood waits for its reader.
  const other = await fetch(`${gw.url}/other`, { headers: { 'x-user': 'another' } })
  assert.equal(other.status, 200)
  s.destroy()
})

test('a long pipeline whose client reads only later does not keep another connection waiting for its end', async () => {
  const n = 40_000
  const s = await open()
  // Not read until the other connection is answered: the gateway answers what its socket takes, then
  // waits for the reader (about 17 MB of answers, more than loopback buffers hold), so the pipeline
  // cannot end first however the machine schedules either process.
  s.pause()
  const before = (await metricValue(gw, 'fairvisor_decisions_total', 'action="reject"')) ?? 0
  s.write(REQ.repeat(n))
  const r = await fetch(`${gw.url}/other`, { headers: { 'x-user': 'third' } })
  assert.equal(r.status, 200)
  await r.text()
  // Decided by the gateway when /other had been answered (the pipeline's first request is allowed, the rest rejected).
  const decided = ((await metricValue(gw, 'fairvisor_decisions_total', 'action="reject"')) ?? 0) - before
  const read = readAnswers(s, n)
  s.resume()
  await read
  s.destroy()
  console.log(`decided when /other was answered: ${decided}`)
  assert.ok(decided < n - 1, `the other connection was answered only after all ${n} pipelined requests (${decided} rejected)`)
})
