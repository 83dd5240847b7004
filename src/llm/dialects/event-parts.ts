/** What every dialect's closing and error events are written from (a leaf: the dialect files and index.ts import it). */

/** Usage written into the closing events (include_partial_usage). */
export interface CutUsage {
  prompt: number
  completion: number
}

/** An error event's type (OpenAI's and Anthropic's names) and code. */
export interface ErrorKind {
  openai: string
  anthropic: string
  code: string
}
