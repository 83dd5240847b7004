#!/usr/bin/env node
/**
 * fairvisor [serve] | validate | test | init | sign | status | version | help. `serve`
 * (the default) reads its settings from the environment; a bad setting prints
 * one line and exits 2. Anything unknown on the command line exits 2 too, and
 * never falls through to serving: a typo must not start a gateway.
 */
import { holdReloadSignal } from './reload-signal.js'
import { SettingError } from './errors.js'
import { loadSettings } from './settings.js'
import type { Gateway } from './main.js'
import { VERSION } from './version.js'

type Command = (args: string[]) => Promise<number>

async function serve(): Promise<number> {
  let gw: Gateway
  try {
    const settings = loadSettings()
    // Several worker threads: the supervisor runs them (workers/supervisor.ts) and handles the signals.
    if (settings.workers > 1) return await (await import('./workers/supervisor.js')).runSupervisor(settings)
    // Some settings (JWT key files) are only checked as their parts start: both stages exit 2.
    gw = await (await import('./main.js')).startGateway(settings)
  } catch (err) {
    if (err instanceof SettingError) {
      process.stderr.write(`fairvisor: invalid setting ${err.message}\n`)
      return 2
    }
    throw err
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      gw.log.info({ signal }, 'signal received')
      gw.shutdown().then(resolve, resolve)
    }
    process.once('SIGTERM', () => stop('SIGTERM'))
    process.once('SIGINT', () => stop('SIGINT'))
  })
  return 0
}

// Sub-commands live in src/commands/<name>.ts and load only when named: imported statically they
// would load (≈ 50 ms) before this module's first line holds SIGHUP (reload-signal.ts) and before
// `serve` starts. Literal paths, so the compiler types each module and tools follow it.
const commands: Record<string, () => Promise<Command>> = {
  serve: async () => serve,
  validate: async () => (await import('./commands/validate.js')).run,
  test: async () => (await import('./commands/test.js')).run,
  init: async () => (await import('./commands/init.js')).run,
  sign: async () => (await import('./commands/sign.js')).run,
  status: async () => (await import('./commands/status.js')).run,
}

const NAMES = 'serve, validate, test, init, sign, status, version or help'

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv
  if (first === '--version' || first === '-v' || first === 'version') {
    if (rest.length) return usageError(`version takes no arguments (got ${rest[0]!})`)
    process.stdout.write(`${VERSION}\n`)
    return 0
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    const { helpText } = await import('./commands/help.js')
    process.stdout.write(helpText())
    return 0
  }
  if (first?.startsWith('-')) return usageError(`unknown option ${first}`)
  const name = first ?? 'serve'
  if (name === 'serve' && rest.length)
    return usageError(`serve takes no arguments (got ${rest[0]!}); it is configured by FAIRVISOR_* environment variables`)
  const load = commands[name]
  if (!load) return usageError(`unknown command "${name}"; use ${NAMES}`)
  let command: Command
  try {
    command = await load()
  } catch {
    process.stderr.write(`fairvisor: the ${name} command is not available in this build\n`)
    return 2
  }
  return command(rest)
}

function usageError(message: string): number {
  process.stderr.write(`fairvisor: ${message}\nrun fairvisor --help for the commands, their flags and the settings\n`)
  return 2
}

// Before the gateway's modules load (a few hundred ms): a SIGHUP from then on is a reload, never a death.
if (process.argv[2] === undefined || process.argv[2] === 'serve') holdReloadSignal()

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
    // A drained server may still hold timers or sockets of libraries: do not wait for them.
    if (process.argv[2] === undefined || process.argv[2] === 'serve') process.exit(code)
  },
  (err: Error) => {
    process.stderr.write(`fairvisor: ${err.stack ?? err.message}\n`)
    process.exitCode = 1
  },
)
