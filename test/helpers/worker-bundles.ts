/**
 * For tests of which bundle a gateway's workers run: two versions of one
 * per-IP bundle told apart by their limit (RateLimit-Limit), temporary bundle
 * files, and requests on new connections (so the kernel may give each to any
 * worker).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { perIpBundle } from './bundles.js'

/** Limit 1000 (v1) and 2000 (v2), one rule name: they share counters. */
export const V1 = perIpBundle(1, 1000)
export const V2 = perIpBundle(2, 2000)

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

const dirs: string[] = []

/** `text` as bundle.json in a new temporary directory (removed by removeBundleFiles). */
export function bundleFile(text: string, name = 'bundle.json'): string {
  const dir = mkdtempSync(join(tmpdir(), 'fv-workers-bundle-'))
  dirs.push(dir)
  const file = join(dir, name)
  writeFileSync(file, text)
  return file
}

export function removeBundleFiles(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
}

export interface Answer {
  status: number
  limit: string | undefined
}

/** One request on a new connection. */
export function ask(port: number, path: string): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume()
      res.on('end', () => done({ status: res.statusCode!, limit: res.headers['ratelimit-limit'] as string | undefined }))
    })
    req.on('error', fail)
    req.end()
  })
}

export async function readyz(port: number): Promise<{ status: number; version: number | undefined }> {
  const r = await fetch(`http://127.0.0.1:${port}/readyz`)
  const body = (await r.json()) as { policy_version?: number }
  return { status: r.status, version: body.policy_version }
}
