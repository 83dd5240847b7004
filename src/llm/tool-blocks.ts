/**
 * Whether a stream is inside a tool call's arguments (docs/llm.md "Cuts
 * inside tool calls"): a cut there would leave a client with half a JSON
 * object, which some parse as "repaired" arguments. Each API's blocks:
 * - Chat Completions (and legacy `function_call`): a call opens with its
 *   first `delta.tool_calls[]` entry and closes when its arguments form a
 *   whole JSON value (scanned as they come), or, for arguments that never
 *   do, when another call of its choice starts or the choice finishes;
 * - Anthropic Messages: `content_block_start` of a `tool_use` (or
 *   `server_tool_use`, `mcp_tool_use`) block until its `content_block_stop`;
 * - Responses API: `response.output_item.added` of a tool-call item
 *   (`function_call`, `custom_tool_call`, `mcp_call`) until its
 *   `response.output_item.done`;
 * - Bedrock ConverseStream: `contentBlockStart` with `toolUse` until its
 *   `contentBlockStop`.
 * Gemini and Ollama send each call whole, in one event.
 */

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v)

const ANTHROPIC_TOOL_BLOCKS = new Set(['tool_use', 'server_tool_use', 'mcp_tool_use'])
const RESPONSES_TOOL_ITEMS = new Set(['function_call', 'custom_tool_call', 'mcp_call'])

/** Where a JSON text being streamed stands: whole once its outermost object or array closed. */
export class JsonEnd {
  private depth = 0
  private inString = false
  private escaped = false
  private opened = false
  whole = false

  feed(text: string): void {
    for (let i = 0; i < text.length && !this.whole; i++) {
      const c = text.charCodeAt(i)
      if (this.inString) {
        if (this.escaped) this.escaped = false
        else if (c === 92)
          this.escaped = true // \
        else if (c === 34) this.inString = false // "
      } else if (c === 34) this.inString = true
      else if (c === 123 || c === 91) {
        this.depth++
        this.opened = true
      } else if ((c === 125 || c === 93) && --this.depth <= 0 && this.opened) this.whole = true
    }
  }
}

export class ToolBlocks {
  /** Chat Completions: per choice, its last call (its index, and where its arguments' JSON stands). */
  private readonly chat = new Map<number, { call: number; json: JsonEnd }>()
  /** Anthropic / Bedrock content block indexes, Responses output indexes, of tool calls not closed. */
  private readonly blocks = new Set<number>()

  /** A tool call's arguments are streaming: a cut now would leave them half sent. */
  get open(): boolean {
    if (this.blocks.size > 0) return true
    for (const c of this.chat.values()) if (!c.json.whole) return true
    return false
  }

  /** One stream event (`name`: its SSE event name, or a framing's event type). */
  observe(name: string | undefined, o: Obj): void {
    if (Array.isArray(o.choices)) {
      for (const c of o.choices) if (isObj(c)) this.choice(c)
      return
    }
    const type = typeof o.type === 'string' ? o.type : name
    const index = typeof o.index === 'number' ? o.index : typeof o.contentBlockIndex === 'number' ? o.contentBlockIndex : -1
    switch (type) {
      case 'content_block_start':
        if (isObj(o.content_block) && ANTHROPIC_TOOL_BLOCKS.has(String(o.content_block.type))) this.blocks.add(index)
        return
      case 'contentBlockStart':
        if (isObj(o.start) && isObj(o.start.toolUse)) this.blocks.add(index)
        return
      case 'content_block_stop':
      case 'contentBlockStop':
        this.blocks.delete(index)
        return
      case 'response.output_item.added':
        if (isObj(o.item) && RESPONSES_TOOL_ITEMS.has(String(o.item.type)) && typeof o.output_index === 'number')
          this.blocks.add(o.output_index)
        return
      case 'response.output_item.done':
        if (typeof o.output_index === 'number') this.blocks.delete(o.output_index)
        return
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
      case 'message_stop':
      case 'messageStop':
        this.blocks.clear()
    }
  }

  private choice(c: Obj): void {
    const at = typeof c.index === 'number' ? c.index : 0
    const d = c.delta
    if (isObj(d)) {
      if (Array.isArray(d.tool_calls))
        for (const t of d.tool_calls) {
          if (!isObj(t)) continue
          const call = typeof t.index === 'number' ? t.index : 0
          const args = isObj(t.function) && typeof t.function.arguments === 'string' ? t.function.arguments : ''
          this.args(at, call, t.id !== undefined && t.id !== null, args)
        }
      if (isObj(d.function_call)) {
        const args = typeof d.function_call.arguments === 'string' ? d.function_call.arguments : ''
        this.args(at, -1, typeof d.function_call.name === 'string', args)
      }
    }
    if (c.finish_reason !== null && c.finish_reason !== undefined) this.chat.delete(at)
  }

  /** Arguments of call `call` of choice `at` (`starts`: the entry opens the call, with its id or name). */
  private args(at: number, call: number, starts: boolean, text: string): void {
    let open = this.chat.get(at)
    if (open === undefined || open.call !== call || starts) {
      open = { call, json: new JsonEnd() }
      this.chat.set(at, open)
    }
    open.json.feed(text)
  }
}
