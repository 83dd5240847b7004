/** nginx for tests and benchmarks: foreground, one worker, unprivileged, every path under one temp dir. */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { docsBlock } from './docs-blocks.js'
import { freePort } from './processes.js'

/** The ```nginx block of docs/integrations.md (the page operators copy it from) between `<!-- <marker>:begin -->` and `<!-- <marker>:end -->`, or undefined. */
export function docsNginxBlock(marker: string): string | undefined {
  return docsBlock(marker, 'nginx')
}

/** A whole nginx.conf around `httpBody` (the inside of `http {}`), with pid, logs and temp paths under `dir`. */
export function nginxConf(dir: string, httpBody: string, workerConnections = 256): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections ${workerConnections}; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${httpBody}
}
`
}

export interface NginxProcess {
  /** http://127.0.0.1:<port> of its listener. */
  url: string
  /** What nginx wrote to stderr so far. */
  stderr(): string
  stop(): Promise<void>
}

/**
 * The docs' nginx `auth_request` block (docs/integrations.md, marker nginx-auth-request) run for
 * real in front of `backendPort`, asking the gateway on `gatewayPort`; only the two upstream
 * addresses and the listen address are replaced. Resolves once nginx accepts connections.
 */
export async function startDocsAuthRequest(gatewayPort: number, backendPort: number): Promise<NginxProcess> {
  const block = docsNginxBlock('nginx-auth-request')
  if (block === undefined) throw new Error('docs/integrations.md has no nginx-auth-request block')
  const dir = mkdtempSync(join(tmpdir(), 'fv-nginx-'))
  const port = await freePort()
  const server = block
    .replace('server 127.0.0.1:8080;', `server 127.0.0.1:${gatewayPort};`)
    .replace('server 127.0.0.1:3000;', `server 127.0.0.1:${backendPort};`)
    .replace('listen 80;', `listen 127.0.0.1:${port};`)
  writeFileSync(join(dir, 'nginx.conf'), nginxConf(dir, server))
  const check = spawnSync('nginx', ['-t', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' })
  if (check.status !== 0) throw new Error(`nginx -t: ${check.stderr}`)
  const proc = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const exited = new Promise((r) => proc.once('exit', r))
  const deadline = Date.now() + 20_000
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy()
        resolve(true)
      })
      s.on('error', () => resolve(false))
    })
    if (up) break
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`nginx did not start: ${err}`)
    await sleep(50)
  }
  return {
    url: `http://127.0.0.1:${port}`,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGQUIT')
        await exited
      }
    },
  }
}
