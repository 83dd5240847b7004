/** Temporary data files (ASN map, .mmdb, Tor exit list) for tests of the ip: descriptors. */
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

let dir: string | undefined

/** A fresh directory per test file (one process per file). */
export function dataDir(): string {
  return (dir ??= mkdtempSync(join(tmpdir(), 'fv-data-')))
}

/** Writes `content` to `name` in dataDir() and returns the path. */
export function tempFile(name: string, content: string | Buffer): string {
  const file = join(dataDir(), name)
  writeFileSync(file, content)
  return file
}

/** Replaces `file` the way docs/descriptors.md tells operators to: write aside, then rename over it. */
export function replaceAtomically(file: string, content: string | Buffer): void {
  const next = `${file}.next`
  writeFileSync(next, content)
  renameSync(next, file)
}
