/**
 * The loop-detection fingerprint (docs/behaviour.md §5): method, normalised path, query
 * parameters sorted, and the values of the policy's limit keys sorted by key,
 * hashed so the counter key stays short whatever the request carries.
 */
import { createHash } from 'node:crypto'
import type { CompiledPolicy } from '../bundle/compile.js'
import type { RequestView } from '../request/view.js'

export function loopFingerprint(policy: CompiledPolicy, view: RequestView): string {
  const query = new URLSearchParams(view.rawQuery)
  query.sort()
  let text = `${view.method}\n${view.path}\n${query.toString()}`
  for (const d of policy.descriptorKeys) text += `\n${d.name}=${d.extract(view) ?? ''}`
  return createHash('sha1').update(text).digest('base64url').slice(0, 22)
}
