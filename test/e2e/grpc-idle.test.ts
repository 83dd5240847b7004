/**
 * What the gRPC listener lets a peer keep open over time, through the real
 * gateway process (both timeouts shortened): a connection without an open
 * stream is closed after FAIRVISOR_GRPC_IDLE_TIMEOUT_MS (GOAWAY, then the
 * socket, whether or not the peer ever spoke), never while a stream is open;
 * a call not answered within FAIRVISOR_GRPC_STREAM_TIMEOUT_MS (no
 * grpc-timeout, or a longer one) is answered DEADLINE_EXCEEDED and gives its
 * bytes back. A gRPC client whose idle connection was closed reconnects.
 */
import assert from 'node:assert/strict'
import { connectivityState } from '@grpc/grpc-js'
import { mkdtempSync } from 'node:fs'
import { type ClientHttp2Session, connect } from 'node:http2'
import { createConnection, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { grpcFrame } from '../../src/grpc/wire.js'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { checkRequest, grpcClients } from '../helpers/grpc-client.js'
import { FRAME, rawH2 } from '../helpers/h2-raw.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const IDLE_MS = 600
const STREAM_MS = 1500
const CHECK = '/envoy.service.auth.v3.Authorization/Check'
/** The first KiB of a 64 KiB message: the length prefix promises more, so the request is never whole. */
const FIRST_KIB = grpcFrame(Buffer.alloc(64 * 1024, 0x41)).subarray(0, 1024)

/** `p`, or a failure after a deadline well under what the listener allowed before (no bound at all), and generous for a loaded machine. */
function within<T>(p: Promise<T>, what: string, ms = 20_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

describe('gRPC listener: idle connections and calls that never finish', { timeout: 120_000 }, () => {
  let gw: GatewayProcess
  let port: number
  before(async () => {
    const file = writeHeaderBucketBundle(mkdtempSync(join(tmpdir(), 'fv-grpc-idle-')), 'u', { tokens_per_second: 1, burst: 1000 })
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: file,
      FAIRVISOR_GRPC_PORT: '0',
      FAIRVISOR_GRPC_IDLE_TIMEOUT_MS: String(IDLE_MS),
      FAIRVISOR_GRPC_STREAM_TIMEOUT_MS: String(STREAM_MS),
    })
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))
    port = line.grpcPort as number
  })
  after(async () => {
    await gw?.stop()
  })

  const held = async (): Promise<number> => (await metricValue(gw, 'fairvisor_grpc_buffered_bytes')) ?? Number.NaN

  // They read (the GOAWAY, the end of the stream): a socket never read would not see its peer close it.
  test('200 connections that never send a byte are closed after the idle timeout', async () => {
    const t0 = performance.now()
    const silent: Socket[] = Array.from({ length: 200 }, () =>
      createConnection(port, '127.0.0.1')
        .on('error', () => {})
        .resume(),
    )
    const closedAt = silent.map((s) => new Promise<number>((r) => s.once('close', () => r(performance.now() - t0))))
    try {
      const times = await within(Promise.all(closedAt), 'the silent connections closed')
      assert.ok(Math.min(...times) >= IDLE_MS * 0.9, `closed after ${Math.min(...times)} ms, before the idle timeout`)
    } finally {
      for (const s of silent) s.destroy()
    }
  })

  test('a connection is closed with GOAWAY once idle, and not while it has a stream open', async () => {
    const h2 = await rawH2(port)
    h2.open(1, CHECK) // never ended: held open until the stream timeout
    const t0 = performance.now()
    await within(h2.closed, 'the connection closed')
    const took = performance.now() - t0
    assert.ok(took >= STREAM_MS * 0.9, `closed after ${took} ms, while its stream was open`)
    const goaway = h2.frames.find((f) => f.type === FRAME.GOAWAY)
    assert.ok(goaway, 'GOAWAY sent before closing')
    assert.equal(goaway.payload.readUInt32BE(4), 0, 'NO_ERROR')
    const answer = h2.frames.findIndex((f) => f.type === FRAME.HEADERS && f.stream === 1)
    assert.ok(answer >= 0 && answer < h2.frames.indexOf(goaway), 'the stream was answered (DEADLINE_EXCEEDED) first')
  })

  for (const timeout of [undefined, '100S']) {
    test(`a request never finished (grpc-timeout ${timeout ?? 'unset'}) is answered DEADLINE_EXCEEDED after the stream timeout, its bytes given back`, async () => {
      const session: ClientHttp2Session = connect(`http://127.0.0.1:${port}`).on('error', () => {})
      try {
        const headers: Record<string, string> = { ':method': 'POST', ':path': CHECK, 'content-type': 'application/grpc', te: 'trailers' }
        if (timeout) headers['grpc-timeout'] = timeout
        const stream = session.request(headers)
        stream.on('error', () => {})
        let status: number | undefined
        stream.on('response', (h) => (status = Number(h['grpc-status'])))
        const t0 = performance.now()
        stream.write(FIRST_KIB)
        await waitFor(async () => (await held()) === 1024, 'the unfinished request held')
        await waitFor(() => status !== undefined, 'the call answered', 20_000)
        assert.equal(status, 4, 'DEADLINE_EXCEEDED')
        assert.ok(performance.now() - t0 >= STREAM_MS * 0.9)
        await waitFor(async () => (await held()) === 0, 'its bytes given back')
      } finally {
        session.destroy()
      }
    })
  }

  test('a gRPC client whose idle connection was closed calls again on a new one', async () => {
    const clients = grpcClients(port)
    try {
      const first = await clients.check(checkRequest({ path: '/api/x', headers: { 'x-user': 'idle' } }))
      assert.ok(first.ok_response)
      const channel = clients.authz.getChannel()
      await waitFor(() => channel.getConnectivityState(false) !== connectivityState.READY, 'the idle connection closed by the listener')
      const second = await clients.check(checkRequest({ path: '/api/x', headers: { 'x-user': 'idle' } }))
      assert.ok(second.ok_response)
    } finally {
      clients.close()
    }
  })
})
