// redis-parser ships no types; this is the part of its API the store uses.
declare module 'redis-parser' {
  interface ParserOptions {
    // A reply is a string, number, Buffer, null, an Error or an array of these: the caller narrows it.
    returnReply(reply: unknown): void
    returnError(err: Error): void
    returnFatalError?(err: Error): void
    returnBuffers?: boolean
    stringNumbers?: boolean
  }
  export default class Parser {
    constructor(options: ParserOptions)
    execute(chunk: Buffer): void
    reset(): void
  }
}
