/**
 * watchPath on a bundle whose directory is swapped out under it, many times
 * in a row and at once (rm -rf, mkdir, write): after every swap the next
 * write is still seen. A directory made again at once may get the freed inode
 * number back and may come with no event at all; the watcher must notice it
 * anyway (identity of inode and birth time, checked on a timer too).
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { watchPath } from '../../src/file-watch.js'

test('after each of ten quick directory swaps, the next write is read', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'fv-watch-')), 'bundles')
  const file = join(dir, 'bundle.json')
  mkdirSync(dir)
  writeFileSync(file, '0')
  const { seen, w, readBack } = recorder(file)
  await w.ready
  try {
    for (let i = 1; i <= 10; i++) {
      rmSync(dir, { recursive: true, force: true })
      mkdirSync(dir)
      writeFileSync(file, `swap-${i}`)
      await readBack(`swap-${i}`)
      writeFileSync(file, `write-${i}`)
      await readBack(`write-${i}`)
    }
  } finally {
    await w.close()
  }
  assert.ok(seen.includes('write-10'))
})

/** A watcher on `file` that records every read, and a way to wait (on its events) until `text` was read. */
function recorder(file: string): { seen: string[]; w: ReturnType<typeof watchPath>; readBack(text: string): Promise<void> } {
  const seen: string[] = []
  let wake: (() => void) | undefined
  const w = watchPath(file, () => {
    try {
      seen.push(readFileSync(file, 'utf8'))
    } catch {
      return
    }
    wake?.()
  })
  const readBack = (text: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`"${text}" never read; read: ${seen.join(' ')}`)), 15_000)
      wake = () => {
        if (!seen.includes(text)) return
        clearTimeout(t)
        resolve()
      }
      wake()
    })
  return { seen, w, readBack }
}

test('writes to other files beside the bundle and beside its directory reload nothing; the bundle write does', async () => {
  const parent = mkdtempSync(join(tmpdir(), 'fv-watch-'))
  const dir = join(parent, 'bundles')
  mkdirSync(dir)
  const file = join(dir, 'bundle.json')
  writeFileSync(file, 'v1')
  const r = recorder(file)
  await r.w.ready
  try {
    for (let i = 0; i < 50; i++) {
      writeFileSync(join(dir, `other-${i % 5}.txt`), String(i))
      writeFileSync(join(parent, `beside-${i % 5}.txt`), String(i))
    }
    writeFileSync(file, 'v2')
    await r.readBack('v2')
    // The debounced reload that read v2 is the only one: the 100 other writes asked for none.
    assert.deepEqual(r.seen, ['v2'])
  } finally {
    await r.w.close()
  }
})

test('a bundle directory that does not exist yet is watched once it is made', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'fv-watch-')), 'later')
  const file = join(dir, 'bundle.json')
  const r = recorder(file)
  await r.w.ready
  try {
    mkdirSync(dir)
    writeFileSync(file, 'first')
    await r.readBack('first')
    writeFileSync(file, 'second')
    await r.readBack('second')
  } finally {
    await r.w.close()
  }
})
