/**
 * gRPC load from h2load (nghttp2's HTTP/2 load generator, written in C like
 * wrk): the same request message framed once and posted on every stream, so
 * a gRPC listener can be measured against an HTTP one with a load generator
 * of the same cost class on each side.
 */
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { grpcFrame } from '../../src/grpc/wire.js'
import type { LoadResult } from './lib.js'

export interface H2Load {
  url: string
  /** The serialized request message (unframed). */
  message: Buffer
  /** TCP connections, and streams in flight on each. */
  clients: number
  streams: number
  seconds: number
  dir: string
}

/** Parses h2load's summary: `finished in …, N req/s`, the requests line, the mean time for a request. */
export function parseH2load(out: string): LoadResult {
  const reqs = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out)
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out)
  const mean = /time for request:\s+\S+\s+\S+\s+(\S+)/.exec(out)?.[1] ?? ''
  const ms = /^([\d.]+)(us|ms|s)$/.exec(mean)
  const meanMs = ms ? Number(ms[1]) * (ms[2] === 'us' ? 0.001 : ms[2] === 's' ? 1000 : 1) : NaN
  return {
    tool: 'h2load',
    rps: Number(/finished in [\d.]+\w*, ([\d.]+) req\/s/.exec(out)?.[1] ?? NaN),
    // h2load prints no percentiles: the mean stands in for the median.
    p50Ms: meanMs,
    p99Ms: NaN,
    requests: Number(reqs?.[2] ?? NaN),
    non2xx: codes ? Number(codes[2]) + Number(codes[3]) + Number(codes[4]) : NaN,
    errors: reqs ? Number(reqs[4]) + Number(reqs[5]) + Number(reqs[6]) : NaN,
  }
}

export async function runH2load(o: H2Load): Promise<LoadResult> {
  const body = join(o.dir, `grpc-${Math.random().toString(36).slice(2)}.bin`)
  writeFileSync(body, grpcFrame(o.message))
  const args = ['-t1', `-c${o.clients}`, `-m${o.streams}`, `-D${o.seconds}`, '-d', body]
  args.push('-H', 'content-type: application/grpc', '-H', 'te: trailers', o.url)
  const proc = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  proc.stdout.on('data', (c: Buffer) => (out += c))
  proc.stderr.on('data', (c: Buffer) => (out += c))
  const code = await new Promise<number | null>((r) => proc.once('close', r))
  if (code !== 0) throw new Error(`h2load exited with ${code}: ${out}`)
  return parseH2load(out)
}
