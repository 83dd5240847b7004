/**
 * `fairvisor sign --key-file K <bundle.json|-> [--out F]`: write the signed
 * form of a bundle (first line: base64 HMAC-SHA256 of the rest, then the
 * bundle's bytes unchanged) for a gateway run with FAIRVISOR_BUNDLE_SIGNING_KEY.
 * The bundle is validated first: signing a bundle the gateway would refuse
 * only moves the mistake to the rollout.
 */
import { writeFileSync } from 'node:fs'
import { loadBundleBytes } from '../bundle/load.js'
import { readKeyFile, signBundle } from '../bundle/signature.js'
import { parseArgs, readInput, UsageError } from './args.js'

export const USAGE = 'usage: fairvisor sign --key-file <file> <bundle.json|-> [--out <file>]'

export async function run(args: string[]): Promise<number> {
  let path: string
  let keyFile: string
  let out: string | undefined
  try {
    const a = parseArgs(args, ['key-file', 'out'])
    if (a.positional.length !== 1) throw new UsageError('give one bundle file, or - for standard input')
    const k = a.options.get('key-file')
    if (k === undefined) throw new UsageError('--key-file is required (a file holding the key, at least 32 characters)')
    path = a.positional[0]!
    keyFile = k
    out = a.options.get('out')
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor sign: ${err.message}\n${USAGE}\n`)
    return 2
  }
  let key: string
  let bytes: Buffer
  try {
    key = readKeyFile(keyFile)
    bytes = await readInput(path)
  } catch (err) {
    process.stderr.write(`fairvisor sign: ${(err as Error).message}\n`)
    return 1
  }
  const r = loadBundleBytes(bytes, path === '-' ? '<stdin>' : path, Date.now())
  const errors = r.ok ? r.dropped : r.errors
  if (errors.length) {
    for (const e of errors) process.stderr.write(`error: ${e}\n`)
    process.stderr.write(
      `fairvisor sign: not signed: the bundle has ${errors.length} error${errors.length === 1 ? '' : 's'} (see fairvisor validate)\n`,
    )
    return 1
  }
  const signed = signBundle(bytes, key)
  if (out === undefined) process.stdout.write(signed)
  else writeFileSync(out, signed)
  return 0
}
