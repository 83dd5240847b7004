/**
 * Cuts inside tool calls (docs/llm.md "Cuts inside tool calls") with every
 * common client, through the real gateway in front of an upstream streaming
 * one long tool call in each API's recorded shape (test/helpers/tool-streams.ts):
 * a limit passed inside the call's arguments waits for the call to close
 * (FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS, 1024 by default) and the client gets
 * the whole call, its grace tokens charged; a call longer than the grace ends
 * with the API's error event, which every client surfaces as an error. No
 * client ever sees the call with part of its arguments (LangChain's
 * "repaired" JSON, the AI SDK's InvalidToolInputError, the Agents SDK running
 * the tool on them).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import Anthropic from '@anthropic-ai/sdk'
import { createAnthropic } from '@ai-sdk/anthropic'
import { createOpenAI } from '@ai-sdk/openai'
import { ChatAnthropic } from '@langchain/anthropic'
import type { AIMessageChunk } from '@langchain/core/messages'
import { ChatOpenAI } from '@langchain/openai'
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from '@openai/agents'
import { jsonSchema, streamText, tool as aiTool } from 'ai'
import OpenAI from 'openai'
import { startApiLlm, type ApiLlm, type SeenRequest } from '../helpers/api-llm.js'
import { metricValue, startGateway, type GatewayProcess } from '../helpers/processes.js'
import { chatToolStream, messagesToolStream, responsesToolStream, TOOL, TOOL_SCHEMA, toolArgs } from '../helpers/tool-streams.js'

setTracingDisabled(true)

const CLIENTS = [
  'openai',
  'anthropic',
  'ai-openai',
  'ai-anthropic',
  'langchain-openai',
  'langchain-anthropic',
  'agents',
  'agents-chat',
] as const
type Client = (typeof CLIENTS)[number]

/** About 300 tokens of arguments: passes the 50-token limit and ends within the grace. */
const SHORT = toolArgs(1200)
/** About 2,000 tokens: does not end within the 1,024 tokens of grace. */
const LONG = toolArgs(8000)
const PROMPT = 'Write my notes on rate limits to a file.'

function writeBundle(dir: string): string {
  const cut = { tokens_per_minute: 1_000_000, max_completion_tokens: 50, streaming: { buffer_tokens: 10 } }
  const p = (id: string): object => ({
    id,
    spec: {
      selector: { pathPrefix: `/${id}/` },
      mode: 'enforce',
      rules: [{ name: id, limit_keys: ['llm:api_key'], algorithm: 'token_bucket_llm', algorithm_config: cut }],
    },
  })
  const file = join(dir, 'bundle.json')
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies: [p('short'), p('long')] }))
  return file
}

/** A turn after the tool ran (its result in the request): the recorded text answer. */
const afterTool = (r: SeenRequest): boolean => /"(function_call_output|tool_result|tool)"/.test(JSON.stringify(r.body ?? {}))

let upstream: ApiLlm
let gw: GatewayProcess
let n = 0

interface Outcome {
  /** The tool call's arguments as the client gave them (parsed), if it gave one. */
  args?: unknown
  /** The error the client raised or reported. */
  error?: unknown
}

/** One streamed call of `client` with the write_file tool, as each documents tool use. */
async function call(client: Client, policy: string, apiKey: string): Promise<Outcome> {
  const root = `${gw.url}/${policy}`
  const fn = { type: 'function' as const, function: { name: TOOL, description: 'Write a file', parameters: TOOL_SCHEMA } }
  try {
    switch (client) {
      case 'openai': {
        const c = new OpenAI({ apiKey, baseURL: `${root}/v1`, maxRetries: 0 })
        const r = await c.chat.completions
          .stream({ model: 'gpt-4o', messages: [{ role: 'user', content: PROMPT }], tools: [fn] })
          .finalChatCompletion()
        const t = r.choices[0]!.message.tool_calls?.[0] as { function: { arguments: string } } | undefined
        return t === undefined ? {} : { args: JSON.parse(t.function.arguments) }
      }
      case 'anthropic': {
        const c = new Anthropic({ apiKey, baseURL: root, maxRetries: 0 })
        const r = await c.messages
          .stream({
            model: 'claude-haiku-4-5',
            max_tokens: 4000,
            messages: [{ role: 'user', content: PROMPT }],
            tools: [{ name: TOOL, description: 'Write a file', input_schema: TOOL_SCHEMA }],
          })
          .finalMessage()
        const t = r.content.find((b) => b.type === 'tool_use')
        return t === undefined ? {} : { args: t.input }
      }
      case 'ai-openai':
      case 'ai-anthropic': {
        const model =
          client === 'ai-openai'
            ? createOpenAI({ apiKey, baseURL: `${root}/v1` }).chat('gpt-4o')
            : createAnthropic({ apiKey, baseURL: `${root}/v1` })('claude-haiku-4-5')
        let error: unknown
        const r = streamText({
          model,
          prompt: PROMPT,
          maxRetries: 0,
          tools: { [TOOL]: aiTool({ description: 'Write a file', inputSchema: jsonSchema(TOOL_SCHEMA) }) },
          onError: ({ error: e }) => void (error = e),
        })
        // The providers hand on a call left open when the stream ends, even after an error event: the AI SDK
        // marks it invalid (InvalidToolInputError, never run) when its arguments do not parse.
        const calls = (await r.toolCalls).filter((c) => c.invalid !== true)
        return { ...(calls[0] ? { args: calls[0].input } : {}), ...(error !== undefined ? { error } : {}) }
      }
      case 'langchain-openai':
      case 'langchain-anthropic': {
        const base =
          client === 'langchain-openai'
            ? new ChatOpenAI({ model: 'gpt-4o', apiKey, configuration: { baseURL: `${root}/v1` }, maxRetries: 0 })
            : new ChatAnthropic({ model: 'claude-haiku-4-5', apiKey, anthropicApiUrl: root, maxTokens: 4000, maxRetries: 0 })
        let message: AIMessageChunk | undefined
        for await (const c of await base.bindTools([fn]).stream(PROMPT)) message = message === undefined ? c : message.concat(c)
        assert.deepEqual(message?.invalid_tool_calls ?? [], [], `${client}: no invalid tool call`)
        const t = message?.tool_calls?.[0]
        return t === undefined ? {} : { args: t.args }
      }
      case 'agents':
      case 'agents-chat': {
        let args: unknown
        const write = agentTool({
          name: TOOL,
          description: 'Write a file',
          parameters: TOOL_SCHEMA,
          strict: true,
          execute: async (input) => {
            args = input
            return 'written'
          },
        })
        const modelProvider = new OpenAIProvider({ apiKey, baseURL: `${root}/v1`, useResponses: client === 'agents' })
        const agent = new Agent({ name: 'writer', instructions: 'Write files.', model: 'gpt-4.1', tools: [write] })
        const r = await new Runner({ modelProvider }).run(agent, PROMPT, { maxTurns: 3, stream: true })
        await r.completed
        return { ...(args !== undefined ? { args } : {}), ...(r.error ? { error: r.error } : {}) }
      }
    }
  } catch (error) {
    return { error }
  }
}

/** Runs `call`, then waits for `policy`'s consumed-tokens counter to move (the settlement) and returns by how much. */
async function settled<T>(policy: string, run: () => Promise<T>): Promise<{ result: T; used: number }> {
  const read = async (): Promise<number> => (await metricValue(gw, 'fairvisor_tokens_consumed_total', `policy="${policy}"`)) ?? 0
  const before = await read()
  const result = await run()
  for (let deadline = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 10))) {
    const now = await read()
    if (now !== before) return { result, used: now - before }
    assert.ok(Date.now() < deadline, `no settlement for ${policy}`)
  }
}

describe('cuts inside tool calls, with every client', { timeout: 240_000 }, () => {
  before(async () => {
    upstream = await startApiLlm((r) => {
      if (afterTool(r)) return undefined // the recorded text answer
      const args = r.path.startsWith('/long/') ? LONG : SHORT
      const p = r.path.split('?')[0]!
      const body = p.endsWith('/chat/completions')
        ? chatToolStream(args)
        : p.endsWith('/messages')
          ? messagesToolStream(args)
          : responsesToolStream(args)
      return { fixture: 'chat-stream.sse', body }
    })
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: upstream.url,
      FAIRVISOR_CONFIG_FILE: writeBundle(mkdtempSync(join(tmpdir(), 'fv-toolcut-'))),
      FAIRVISOR_STORE: 'memory',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test('a limit passed inside a tool call: the client gets the whole call, the grace tokens charged', async () => {
    for (const client of CLIENTS) {
      const key = `sk-short-${client}-${n++}`
      const { result, used } = await settled('short', () => call(client, 'short', key))
      const cut = await gw.waitForLog(
        (l) => l.event === 'stream_truncated' && l.policy === 'short' && l.tool_call_closed !== undefined && !seen.has(l),
      )
      seen.add(cut)
      assert.equal(cut.tool_call_closed, true, client)
      assert.ok(Number(cut.tool_call_grace_tokens) > 0, client)
      // Every argument token was counted, past the limit: the settlement charges them.
      assert.ok(Number(cut.completion_tokens) >= SHORT.length / 4, `${client}: ${cut.completion_tokens}`)
      assert.ok(used >= Number(cut.completion_tokens), `${client}: settled ${used}`)
      if (client === 'agents' && result.args === undefined) {
        // The Agents SDK's Responses model treats any response.incomplete as a failed turn (ModelBehaviorError).
        assert.match(String(result.error), /incomplete/, client)
        continue
      }
      assert.deepEqual(result.args, JSON.parse(SHORT), `${client}: the whole call (${String(result.error)})`)
      if (client !== 'agents' && client !== 'agents-chat') assert.equal(result.error, undefined, `${client}: ${String(result.error)}`)
    }
  })

  test('a tool call longer than the grace: the API error event, which every client surfaces; never part of the arguments', async () => {
    for (const client of CLIENTS) {
      const key = `sk-long-${client}-${n++}`
      const { result, used } = await settled('long', () => call(client, 'long', key))
      const cut = await gw.waitForLog((l) => l.event === 'stream_truncated' && l.policy === 'long' && !seen.has(l))
      seen.add(cut)
      assert.equal(cut.tool_call_closed, false, client)
      assert.equal(cut.action, 'error_chunk', client)
      assert.ok(Number(cut.tool_call_grace_tokens) >= 1024, `${client}: ${cut.tool_call_grace_tokens}`)
      assert.ok(used >= 50 + 1024, `${client}: settled ${used}`)
      assert.equal(result.args, undefined, `${client}: no tool call`)
      assert.match(said(result.error), /max completion tokens exceeded inside a tool call/, `${client}: ${said(result.error)}`)
    }
    assert.equal(await metricValue(gw, 'fairvisor_llm_stream_cuts_total', 'reason="tool_call_unclosed"'), CLIENTS.length)
  })
})

const seen = new Set<object>()

/** What an error says: its message, or the API's error object as it came (the AI SDK reports that). */
function said(e: unknown): string {
  return e instanceof Error ? `${e.message} ${e.cause instanceof Error ? e.cause.message : ''}` : (JSON.stringify(e) ?? 'none')
}
