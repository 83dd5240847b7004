/**
 * A continuation-style call (`run` hands its result to a callback, at once or
 * later) as a value: the result itself when it was delivered at once, else a
 * promise of it. Lets the hot paths use callbacks while other callers keep a
 * plain value-or-promise API, with no promise when none is needed.
 */
export function nowOrLater<T>(run: (then: (value: T) => void) => void): T | Promise<T> {
  let delivered = false
  let known: T | undefined
  let later: ((value: T) => void) | undefined
  run((value) => {
    if (later) return later(value)
    delivered = true
    known = value
  })
  return delivered ? known! : new Promise<T>((resolve) => (later = resolve))
}
