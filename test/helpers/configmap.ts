/**
 * A Kubernetes ConfigMap volume as the kubelet writes it
 * (pkg/volume/util/atomic_writer.go), for the reload tests:
 *
 *   ..2026_11_23_10_00_01.000000001/bundle.json   the files of one ConfigMap revision
 *   ..data -> ..2026_11_23_10_00_01.000000001     re-pointed atomically on update
 *   bundle.json -> ..data/bundle.json             what the pod sees
 *
 * Each update is the kubelet's: a new timestamped directory, a `..data_tmp`
 * symlink renamed over `..data`, then the old directory removed.
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface ConfigMapVolume {
  /** The mount point (what FAIRVISOR_CONFIG_FILE names when it is a directory). */
  mount: string
  /** mount/bundle.json, the symlink the pod reads. */
  file: string
  /** One ConfigMap update carrying `text` as bundle.json. */
  publish(text: string): void
}

/** A volume at `mount` (an existing empty directory) whose first revision holds `text`. */
export function configMapVolume(mount: string, text: string): ConfigMapVolume {
  let n = 0
  let current: string | undefined
  const publish = (body: string): void => {
    n++
    const revision = `..2026_11_23_10_00_${String(n).padStart(2, '0')}.${String(n).padStart(9, '0')}`
    mkdirSync(join(mount, revision))
    writeFileSync(join(mount, revision, 'bundle.json'), body)
    symlinkSync(revision, join(mount, '..data_tmp'))
    renameSync(join(mount, '..data_tmp'), join(mount, '..data'))
    if (current !== undefined) rmSync(join(mount, current), { recursive: true })
    current = revision
  }
  publish(text)
  symlinkSync('..data/bundle.json', join(mount, 'bundle.json'))
  return { mount, file: join(mount, 'bundle.json'), publish }
}
