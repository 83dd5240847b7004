/**
 * For the tests of keys a client could respell or repeat (test/e2e/credential-keys*.test.ts): a
 * real upstream that bills each call as the API would, a bundle keyed on the inputs a client
 * could double, and requests sent byte for byte (header names, order and repeats as given).
 */
import type { IncomingMessage } from 'node:http'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startBackend, type Backend } from './processes.js'

/** A real upstream that bills each call as the API would: Azure OpenAI by `api-key`, OpenAI by the bearer token, the others by `x-api-key` as Node reads it. */
export interface Billing extends Backend {
  billed: Map<string, number>
}

function billedKey(req: IncomingMessage): string {
  if (req.url!.startsWith('/openai/')) return String(req.headers['api-key'])
  if (req.url!.startsWith('/v1/')) return String(req.headers.authorization).replace(/^Bearer /, '')
  return String(req.headers['x-api-key'])
}

export async function startBilling(): Promise<Billing> {
  const billed = new Map<string, number>()
  const b = await startBackend((req, res) => {
    req.resume()
    req.on('end', () => {
      const k = billedKey(req)
      billed.set(k, (billed.get(k) ?? 0) + 1)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        }),
      )
    })
  })
  return Object.assign(b, { billed })
}

const tb = (name: string, key: string, burst: number): object => ({
  name,
  limit_keys: [key],
  algorithm: 'token_bucket',
  algorithm_config: { tokens_per_second: 0.001, burst },
})
export const BUNDLE = {
  bundle_version: 1,
  policies: [
    { id: 'azure', spec: { selector: { pathPrefix: '/openai/' }, rules: [tb('per_azure_key', 'llm:api_key', 3)] } },
    { id: 'header', spec: { selector: { pathPrefix: '/h/' }, rules: [tb('per_key', 'header:x-api-key', 2)] } },
    { id: 'query', spec: { selector: { pathPrefix: '/q/' }, rules: [tb('per_tenant', 'query:tenant', 2)] } },
  ],
}

export function writeBundle(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-creds-')), 'bundle.json')
  writeFileSync(file, JSON.stringify(BUNDLE))
  return file
}

/** Sends one request byte for byte (header names, order and repeats exactly as given); resolves with the status. */
export function rawStatus(port: number, requestLine: string, headers: [string, string][]): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1')
    let got = ''
    s.setEncoding('latin1')
    s.on('data', (d: string) => {
      got += d
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got)
      if (m) {
        resolve(Number(m[1]))
        s.destroy()
      }
    })
    s.on('error', reject)
    s.on('close', () => reject(new Error(`no status line: ${JSON.stringify(got)}`)))
    const lines = [requestLine, 'Host: api.example.com', ...headers.map(([k, v]) => `${k}: ${v}`), 'Connection: close', '', '']
    s.write(lines.join('\r\n'))
  })
}

/** Statuses of `n` requests, in order. */
export async function statuses(n: number, one: (i: number) => Promise<number>): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push(await one(i))
  return out
}

export const passed = (s: number[]): number => s.filter((x) => x === 200).length
