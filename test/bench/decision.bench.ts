/**
 * Decision service throughput and tail latency: POST /v1/decision answered
 * 200 (allow) and 429 (reject) by the real gateway process, next to nginx
 * `return 200` (one worker) on the same machine as the ceiling of what an
 * HTTP server does with no work. Load from wrk (one thread) over keep-alive
 * connections to 127.0.0.1.
 *
 *   flock /tmp/fv-heavy.lock node --import tsx test/bench/decision.bench.ts [seconds=8] [connections=32]
 */
import { spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../helpers/processes.js'
import { startNginx as startNginxWith } from './lib.js'

const SECONDS = Number(process.argv[2] ?? 8)
const CONNECTIONS = Number(process.argv[3] ?? 32)
const dir = mkdtempSync(join(tmpdir(), 'fv-bench-decision-'))

interface Result {
  name: string
  rps: number
  p50: string
  p99: string
  non2xx: number
  requests: number
}

function haveTool(cmd: string, arg: string): boolean {
  return spawnSync(cmd, [arg]).error === undefined
}

/** One wrk run; `headers` go into a Lua script so the method can be POST. */
function wrk(name: string, url: string, method: string, headers: Record<string, string>, seconds: number): Result {
  const script = join(dir, `${name.replace(/\W+/g, '_')}.lua`)
  writeFileSync(script, [`wrk.method = "${method}"`, ...Object.entries(headers).map(([k, v]) => `wrk.headers["${k}"] = "${v}"`)].join('\n'))
  const r = spawnSync('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, url], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`)
  const out = r.stdout
  const pct = (p: string) => new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out)?.[1] ?? '?'
  return {
    name,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN),
    p50: pct('50'),
    p99: pct('99'),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN),
  }
}

/** nginx `return 200`, one worker (lib.ts starts and tracks it). */
async function startNginx(): Promise<{ url: string; proc: ChildProcess }> {
  const running = await startNginxWith((port) => `  server { listen 127.0.0.1:${port}; location / { return 200; } }`, 'nginx return 200')
  return { url: `${running.url}/`, proc: running.proc }
}

async function main(): Promise<void> {
  if (!haveTool('wrk', '-v')) throw new Error('wrk is not installed (apt-get install wrk)')
  writeFileSync(
    join(dir, 'bundle.json'),
    JSON.stringify({
      bundle_version: 1,
      policies: [
        // Never runs out: every call is a full evaluation that charges one token and allows.
        {
          id: 'allow',
          spec: {
            selector: { pathPrefix: '/allow/' },
            rules: [
              {
                name: 'allow_user',
                limit_keys: ['header:x-user'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 1e9, burst: 1e9 },
              },
            ],
          },
        },
        // Empty after the first call: every later call is a full evaluation that rejects.
        {
          id: 'reject',
          spec: {
            selector: { pathPrefix: '/reject/' },
            rules: [
              {
                name: 'reject_user',
                limit_keys: ['header:x-user'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 0.001, burst: 1 },
              },
            ],
          },
        },
      ],
    }),
  )
  const gw = await startGateway({
    FAIRVISOR_MODE: 'decision_service',
    FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'),
    FAIRVISOR_LOG_LEVEL: 'info',
  })
  const results: Result[] = []
  try {
    const decision = `${gw.url}/v1/decision`
    const call = (uri: string) => ({
      'X-Original-Method': 'GET',
      'X-Original-URI': uri,
      'X-Original-Host': 'api.example.com',
      'X-User': 'bench-user',
    })
    wrk('warm-up', decision, 'POST', call('/allow/items?page=1'), 2)
    results.push(wrk('decision allow (200)', decision, 'POST', call('/allow/items?page=1'), SECONDS))
    results.push(wrk('decision reject (429)', decision, 'POST', call('/reject/items?page=1'), SECONDS))
  } finally {
    await gw.stop()
  }
  if (haveTool('nginx', '-v')) {
    const nginx = await startNginx()
    try {
      wrk('warm-up nginx', nginx.url, 'GET', {}, 1)
      results.push(wrk('nginx return 200 (1 worker)', nginx.url, 'GET', {}, SECONDS))
    } finally {
      nginx.proc.kill('SIGQUIT')
    }
  } else {
    console.error('nginx is not installed: no baseline')
  }
  console.log(`\n${SECONDS} s per run, wrk -t1 -c${CONNECTIONS}, keep-alive, 127.0.0.1, node ${process.version}\n`)
  console.log('| run | requests/s | p50 | p99 | non-2xx |')
  console.log('|---|---:|---:|---:|---:|')
  for (const r of results) console.log(`| ${r.name} | ${Math.round(r.rps)} | ${r.p50} | ${r.p99} | ${r.non2xx} of ${r.requests} |`)
  const allow = results[0]!
  const reject = results[1]!
  // A benchmark that measured the wrong thing must not print figures silently.
  if (allow.non2xx !== 0) throw new Error('allow run had non-2xx answers')
  if (reject.non2xx < reject.requests - CONNECTIONS) throw new Error('reject run was not rejecting')
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
