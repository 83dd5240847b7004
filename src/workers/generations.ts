/**
 * Which bundle each thread runs, in shared memory, so any worker's /readyz
 * can tell whether every worker runs the supervisor's bundle. Slot 0 holds
 * the generation of the supervisor's bundle (0: none yet; +1 per applied
 * bundle), slot `id` the generation worker `id` runs, NOT_RUNNING while no
 * thread serves as that worker (starting, or dead and being replaced).
 * Generations rather than bundle_version: a version may exceed 32 bits.
 */
const NOT_RUNNING = -1

export class Generations {
  private readonly slots: Int32Array

  private constructor(readonly buffer: SharedArrayBuffer) {
    this.slots = new Int32Array(buffer)
  }

  /** The supervisor's, for `workers` workers. */
  static create(workers: number): Generations {
    const g = new Generations(new SharedArrayBuffer((workers + 1) * Int32Array.BYTES_PER_ELEMENT))
    g.slots.fill(NOT_RUNNING, 1)
    return g
  }

  /** A worker's view of the supervisor's table. */
  static attach(buffer: SharedArrayBuffer): Generations {
    return new Generations(buffer)
  }

  get supervisor(): number {
    return Atomics.load(this.slots, 0)
  }

  set supervisor(generation: number) {
    Atomics.store(this.slots, 0, generation)
  }

  /** Worker `id` runs `generation` now. */
  runs(id: number, generation: number): void {
    Atomics.store(this.slots, id, generation)
  }

  /** Worker `id` serves no more (its thread exited). */
  stopped(id: number): void {
    Atomics.store(this.slots, id, NOT_RUNNING)
  }

  /** Every worker that serves runs the supervisor's bundle. */
  inSync(): boolean {
    const want = this.supervisor
    for (let id = 1; id < this.slots.length; id++) {
      const g = Atomics.load(this.slots, id)
      if (g !== NOT_RUNNING && g !== want) return false
    }
    return true
  }
}
