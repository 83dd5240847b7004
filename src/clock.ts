/** The wall clock, read here only (main.ts and the supervisor hand it on): tests and benchmarks drive their own. */
export const clock = (): number => Date.now()
