/**
 * Caddy for tests: the Caddyfile block of docs/integrations.md run as printed in the foreground,
 * with no admin endpoint (nothing to collide with another Caddy on :2019), no automatic HTTPS,
 * listening on 127.0.0.1 only, and its data, configuration and HOME in a temp dir (Caddy writes
 * an autosave and its storage there, never into the user's home).
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { docsBlock } from './docs-blocks.js'
import { freePort } from './processes.js'

export const HAVE_CADDY = spawnSync('caddy', ['version']).error === undefined

export interface CaddyProcess {
  /** http://127.0.0.1:<port> of the site. */
  url: string
  port: number
  /** What Caddy logged so far (JSON lines on stderr). */
  log: string[]
  stop(): Promise<void>
}

/** The ```caddy block between the `caddy` markers of docs/integrations.md. */
export function docsCaddyBlock(): string {
  const block = docsBlock('caddy', 'caddy')
  if (block === undefined) throw new Error('docs/integrations.md has no caddy block between its markers')
  return block
}

/**
 * The docs block in front of `backendPort`, asking the gateway on `gatewayPort`: only the site
 * address (`api.example.com`, replaced by `http://:<port>`, so any Host reaches the site) and
 * the two upstream addresses are replaced. Resolves once Caddy serves its configuration.
 */
export async function startDocsCaddy(gatewayPort: number, backendPort: number): Promise<CaddyProcess> {
  const block = docsCaddyBlock()
  for (const [text, n] of [
    ['api.example.com {', 1],
    ['127.0.0.1:8080', 1],
    ['127.0.0.1:3000', 1],
  ] as const)
    if (block.split(text).length - 1 !== n) throw new Error(`the caddy block names ${text} ${block.split(text).length - 1} times, not ${n}`)
  const dir = mkdtempSync(join(tmpdir(), 'fv-caddy-'))
  const port = await freePort()
  const site = block
    .replace('api.example.com {', `http://:${port} {`)
    .replace('127.0.0.1:8080', `127.0.0.1:${gatewayPort}`)
    .replace('127.0.0.1:3000', `127.0.0.1:${backendPort}`)
  const file = join(dir, 'Caddyfile')
  writeFileSync(file, `{\n\tadmin off\n\tauto_https off\n\tdefault_bind 127.0.0.1\n}\n${site}`)
  const env = { PATH: process.env.PATH, HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config') }
  const proc = spawn('caddy', ['run', '--config', file, '--adapter', 'caddyfile'], { env, stdio: ['ignore', 'ignore', 'pipe'] })
  // Never leave Caddy behind, even if the test process dies without running stop().
  const kill = (): void => void proc.kill('SIGKILL')
  process.once('exit', kill)
  const exited = new Promise<void>((r) => proc.once('exit', () => r()))
  const log: string[] = []
  const served = new Promise<void>((resolve, reject) => {
    createInterface({ input: proc.stderr! }).on('line', (line) => {
      log.push(line)
      if (line.includes('serving initial configuration')) resolve()
    })
    void exited.then(() => reject(new Error(`caddy exited before serving: ${log.join('\n')}`)))
  })
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM')
      await exited
    }
    process.removeListener('exit', kill)
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await served
  } catch (err) {
    await stop()
    throw err
  }
  return { url: `http://127.0.0.1:${port}`, port, log, stop }
}
