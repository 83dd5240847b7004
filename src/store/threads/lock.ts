/**
 * A lock word in shared memory (the counter table's buckets, the lease
 * table's groups): 0 when free, else (owner thread id + 1) * 2, plus 1 while
 * another thread waits for it. The owner is kept in the word so that the
 * supervisor can free the locks of a worker that died holding them.
 */

/** Set in a lock word while another thread sleeps on it (the holder then notifies). */
const CONTENDED = 1
/** Bound on one Atomics.wait, so a lock released without a notify is still seen. */
const WAIT_MS = 20

/** The lock word value of thread `threadId`. */
export const lockOwner = (threadId: number): number => (threadId + 1) * 2
/** The thread id of a lockOwner value. */
export const ownerThread = (owner: number): number => owner / 2 - 1

/** Spin briefly (critical sections are a few loads and stores), then sleep on the word. */
export function lockWord(locks: Int32Array, i: number, me: number): void {
  if (Atomics.compareExchange(locks, i, 0, me) === 0) return
  for (let spin = 0; spin < 64; spin++) {
    if (Atomics.load(locks, i) === 0 && Atomics.compareExchange(locks, i, 0, me) === 0) return
  }
  for (;;) {
    const v = Atomics.load(locks, i)
    if (v === 0) {
      if (Atomics.compareExchange(locks, i, 0, me | CONTENDED) === 0) return
      continue
    }
    if ((v & CONTENDED) === 0 && Atomics.compareExchange(locks, i, v, v | CONTENDED) !== v) continue
    Atomics.wait(locks, i, v | CONTENDED, WAIT_MS)
  }
}

export function unlockWord(locks: Int32Array, i: number): void {
  if ((Atomics.exchange(locks, i, 0) & CONTENDED) !== 0) Atomics.notify(locks, i)
}

/** Free word `i` if thread `owner` (a lockOwner value) holds it; true when freed. */
export function freeIfOwned(locks: Int32Array, i: number, owner: number): boolean {
  const v = Atomics.load(locks, i)
  if ((v & ~CONTENDED) !== owner || Atomics.compareExchange(locks, i, v, 0) !== v) return false
  Atomics.notify(locks, i)
  return true
}
