/**
 * A worker thread loads only what its gateway uses: with the in-process store, no gRPC listener,
 * no RLS configuration, statsd, GeoIP file or LLM rule, none of the Redis or PostgreSQL clients,
 * protobufjs, yaml, hot-shots, maxmind, the BPE tables, Bedrock's event-stream codec (@smithy/core),
 * the OpenTelemetry SDK and exporter (traces off) or the JSON Schema validator is loaded in any
 * worker (they cost several MiB each per thread: docs/deploy.md#sizing-workers-cpu-and-memory);
 * configured, each is loaded where it is used. Read from the real gateway process: a preload
 * (test/fixtures/preload/loaded-packages.cjs) lists each thread's CommonJS packages when it exits.
 * jose is an ES module, not listed there: its import is in the JWT tests' path.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, type GatewayProcess, ROOT, startBackend, startGateway } from '../helpers/processes.js'
import { dataDir, tempFile } from '../helpers/data-files.js'
import { countryRecord, writeMmdb } from '../helpers/mmdb.js'

const PRELOAD = join(ROOT, 'test/fixtures/preload/loaded-packages.cjs')
/** Loaded only for a feature a gateway may not use. */
const OPTIONAL = [
  'ioredis',
  'redis-parser',
  'cluster-key-slot',
  'pg',
  '@grpc/proto-loader',
  'protobufjs',
  'yaml',
  'hot-shots',
  'maxmind',
  'gpt-tokenizer',
  '@smithy/core',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/resources',
]

interface Thread {
  threadId: number
  packages: string[]
}

/** The gateway with two workers on `env`, a few requests through it, stopped: what each thread loaded. */
async function loadedBy(env: Record<string, string>, backend: Backend): Promise<Thread[]> {
  const out = join(dataDir(), `loaded-${Math.random().toString(36).slice(2)}.jsonl`)
  const gw: GatewayProcess = await startGateway(
    {
      FAIRVISOR_WORKERS: '2',
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: join(ROOT, 'policies/per-api-key.json'),
      FV_LOADED_PACKAGES: out,
      ...env,
    },
    { nodeArgs: ['--require', PRELOAD] },
  )
  // Allowed (proxied) and rejected answers, on every connection the kernel spreads over the workers.
  const statuses = await Promise.all(
    Array.from({ length: 8 }, async () => (await fetch(`${gw.url}/anything`, { headers: { 'x-api-key': 'k-1' } })).status),
  )
  assert.ok(
    statuses.every((s) => s === 200 || s === 429),
    `statuses ${statuses.join(', ')}`,
  )
  assert.equal(await gw.stop(), 0)
  const threads = readFileSync(out, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Thread)
  assert.equal(threads.length, 3, 'the supervisor and two workers each wrote their list')
  return threads
}

let backend: Backend
before(async () => {
  backend = await startBackend()
})
after(() => backend?.close())

describe('what a worker thread loads', () => {
  test('in-process store, nothing optional configured: no optional package in any thread, no validator in a worker', async () => {
    const threads = await loadedBy({ FAIRVISOR_STORE: 'memory' }, backend)
    for (const t of threads) {
      const unwanted = t.packages.filter((p) => OPTIONAL.includes(p) || (t.threadId !== 0 && p === 'ajv'))
      assert.deepEqual(unwanted, [], `thread ${t.threadId} loaded ${unwanted.join(', ')}`)
    }
    // The supervisor validates the bundle; the workers build it from its findings.
    assert.ok(threads.find((t) => t.threadId === 0)!.packages.includes('ajv'))
  })

  test('Redis, a gRPC listener, an RLS configuration and a GeoIP file: their packages load in the workers that use them', async () => {
    const country = tempFile('lazy-country.mmdb', writeMmdb([{ network: '203.0.113.0/24', record: countryRecord('DE') }]))
    const rls = tempFile(
      'lazy-rls.yaml',
      'domain: lazy\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }\n',
    )
    const threads = await loadedBy(
      {
        FAIRVISOR_STORE: 'redis://127.0.0.1:6379',
        FAIRVISOR_GRPC_PORT: '0',
        FAIRVISOR_RLS_CONFIG: rls,
        FAIRVISOR_GEOIP_COUNTRY_FILE: country,
      },
      backend,
    )
    for (const t of threads.filter((x) => x.threadId !== 0))
      for (const p of ['redis-parser', '@grpc/proto-loader', 'protobufjs', 'maxmind'])
        assert.ok(t.packages.includes(p), `worker thread ${t.threadId} loaded ${p}`)
    // The supervisor reads the RLS configuration (YAML) and the GeoIP file for every worker.
    const supervisor = threads.find((t) => t.threadId === 0)!
    for (const p of ['yaml', 'maxmind']) assert.ok(supervisor.packages.includes(p), `the supervisor loaded ${p}`)
  })
})
