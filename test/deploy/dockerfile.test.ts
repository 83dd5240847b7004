/**
 * The Dockerfile, read as text (no Docker engine here): every path it copies
 * exists in the checkout, and the runtime stage carries everything the
 * published package carries (package.json `files`), so the image has what the
 * code reads at run time (the bundle schema, the sample bundles, the .proto
 * files of the gRPC listener).
 */
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../helpers/processes.js'

const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
const stages = text.split(/^FROM /m).slice(1)
const copies = (stage: string): string[][] => [...stage.matchAll(/^COPY (?!--from)(.+)$/gm)].map((m) => m[1]!.trim().split(/\s+/))

test('every path the Dockerfile copies from the checkout exists', () => {
  for (const stage of stages)
    for (const args of copies(stage))
      for (const src of args.slice(0, -1)) assert.ok(existsSync(join(ROOT, src)), `${src} is not in the checkout`)
})

test("the runtime stage has every directory of the package's files: dist from the build stage, the rest copied", () => {
  const runtime = stages.at(-1)!
  const files = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files
  const copied = new Set(copies(runtime).flatMap((a) => a.slice(0, -1)))
  for (const f of files) {
    if (f === 'dist') assert.match(runtime, /^COPY --from=build \/app\/dist \.\/dist$/m)
    else assert.ok(copied.has(f), `the image lacks ${f}/`)
  }
})
