/**
 * Child process of the worker supervisor (listen-handle.ts): sends every
 * handle it receives straight back. Passing a socket over the IPC channel
 * duplicates its descriptor, which is how the main thread gets one
 * descriptor of the listening socket per worker thread.
 */
process.on('message', (msg: unknown, handle: { close(): void } | undefined) => {
  process.send!(msg, handle as never, () => handle?.close())
})
process.on('disconnect', () => process.exit(0))
