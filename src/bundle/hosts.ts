/** Selector host normalisation (docs/behaviour.md §2): trim, lowercase, drop :port and a trailing dot. */

export function normaliseSelectorHost(raw: string): string {
  let h = raw.trim().toLowerCase()
  h = h.replace(/:\d*$/, '')
  if (h.endsWith('.')) h = h.slice(0, -1)
  return h
}

/** Why a selector host is unacceptable, or undefined when it is fine. */
export function hostProblem(raw: string): string | undefined {
  const t = raw.trim().toLowerCase()
  if (t.includes('://')) return `host "${raw}" must be a bare host name, not a URL`
  if (/[/?#@]/.test(t)) return `host "${raw}" must not contain /, ?, # or @`
  if (t.includes('..')) return `host "${raw}" must not contain ".."`
  const h = normaliseSelectorHost(raw)
  if (h === '') return `host "${raw}" is empty after normalisation`
  if (!/^[a-z0-9.-]+$/.test(h)) return `host "${raw}" may only contain letters, digits, "." and "-"`
  return undefined
}
