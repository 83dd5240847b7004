/**
 * Signed bundles, in Fairvisor's signed form: the first line is the base64
 * HMAC-SHA256 of the rest of the file under a shared key, the rest is the
 * JSON bundle. With a key configured the gateway accepts nothing else, so a
 * bundle that was tampered with, truncated, or written by hand without the
 * key is refused like any other invalid bundle.
 *
 * The key is a string (its UTF-8 bytes are the HMAC key): the gateway takes
 * it from FAIRVISOR_BUNDLE_SIGNING_KEY, the CLI from a file (`--key-file`),
 * where one trailing newline is not part of the key.
 */
import { BundleError } from '../errors.js'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { MIN_KEY_LENGTH } from '../settings.js'

export type Verified = { ok: true; body: Buffer } | { ok: false; message: string }

function mac(key: string, body: Buffer): Buffer {
  return createHmac('sha256', key).update(body).digest()
}

/** The signed form of `body` (the JSON bundle's bytes, kept exactly). */
export function signBundle(body: Buffer, key: string): Buffer {
  return Buffer.concat([Buffer.from(`${mac(key, body).toString('base64')}\n`), body])
}

/** A 32-byte digest in standard base64 with its padding, and nothing else. */
const SIGNATURE = /^[A-Za-z0-9+/]{43}=$/

/**
 * Split a signed file and check its first line against the rest. The
 * signature line may end in CRLF; the signed bytes start right after its LF.
 * Digests are compared in constant time.
 */
export function verifySigned(bytes: Buffer, key: string): Verified {
  const nl = bytes.indexOf(0x0a)
  const line = bytes
    .subarray(0, nl === -1 ? bytes.length : nl)
    .toString('latin1')
    .replace(/\r$/, '')
  if (nl === -1 || !SIGNATURE.test(line)) {
    const what = line
      .replace(/^\xef\xbb\xbf/, '')
      .trimStart()
      .startsWith('{')
      ? 'the file is an unsigned bundle'
      : 'its first line is not a base64 HMAC-SHA256 signature'
    return {
      ok: false,
      message: `bundle_signature_missing: a signing key is configured and ${what} (the signed form's first line is the base64 HMAC-SHA256 of the rest; see fairvisor sign)`,
    }
  }
  const body = bytes.subarray(nl + 1)
  const given = Buffer.from(line, 'base64')
  const want = mac(key, body)
  if (given.length !== want.length || !timingSafeEqual(given, want)) {
    return {
      ok: false,
      message:
        'bundle_signature_invalid: the signature does not match the bundle under the configured key (changed after signing, or signed with another key)',
    }
  }
  return { ok: true, body }
}

/** The key in a key file (the CLI's `--key-file`): the whole file but one trailing newline. Throws with a sentence. */
export function readKeyFile(path: string): string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new BundleError(`key file ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`)
  }
  const key = text.replace(/\r?\n$/, '')
  if (key.length < MIN_KEY_LENGTH)
    throw new BundleError(`key file ${path} holds ${key.length} characters; a signing key has at least ${MIN_KEY_LENGTH}`)
  return key
}
