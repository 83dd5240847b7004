// redis-parser ships no types; this is the part of its API the store uses.
declare module 'redis-parser' {
  interface ParserOptions {
    returnReply(reply: any): void
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
