/**
 * The LLM clients teams put in front of OpenAI- and Anthropic-shaped APIs,
 * each driven the way its documentation shows, behind one call shape so a
 * test can run the same call through all of them: the official SDKs
 * (`openai`, `@anthropic-ai/sdk`), the Vercel AI SDK (`ai` with
 * `@ai-sdk/openai`, `@ai-sdk/anthropic`, `@ai-sdk/openai-compatible`),
 * LangChain JS (`@langchain/openai`, `@langchain/anthropic`) and the OpenAI
 * Agents SDK (`@openai/agents`, Responses and Chat Completions models).
 *
 * `root` is where the client's API lives without its version segment (the
 * gateway's URL plus any path prefix a test routes on): each client adds
 * `/v1/…` the way it does against the real API. `maxRetries` undefined
 * leaves the client's own default, which is what the retry tests measure.
 */
import Anthropic from '@anthropic-ai/sdk'
import { createAnthropic } from '@ai-sdk/anthropic'
import { createOpenAI } from '@ai-sdk/openai'
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { ChatAnthropic } from '@langchain/anthropic'
import { ChatOpenAI } from '@langchain/openai'
import { Agent, OpenAIProvider, Runner, setTracingDisabled } from '@openai/agents'
import { generateText, streamText } from 'ai'
import OpenAI from 'openai'

setTracingDisabled(true)

export const CLIENTS = [
  'openai',
  'anthropic',
  'ai-openai',
  'ai-anthropic',
  'ai-compatible',
  'langchain-openai',
  'langchain-anthropic',
  'agents',
  'agents-chat',
] as const
export type ClientName = (typeof CLIENTS)[number]

/** The API each client calls: Chat Completions, Anthropic Messages or the Responses API. */
export const DIALECT: Record<ClientName, 'chat' | 'messages' | 'responses'> = {
  openai: 'chat',
  anthropic: 'messages',
  'ai-openai': 'chat',
  'ai-anthropic': 'messages',
  'ai-compatible': 'chat',
  'langchain-openai': 'chat',
  'langchain-anthropic': 'messages',
  agents: 'responses',
  'agents-chat': 'chat',
}

export interface CallOptions {
  root: string
  /** The OpenAI-shaped clients' base URL when it is not `root` + `/v1` (Gemini's `/v1beta/openai`). */
  baseURL?: string
  apiKey?: string
  /** Undefined: the client's default. */
  maxRetries?: number
  headers?: Record<string, string>
  maxTokens?: number
  prompt?: string
  signal?: AbortSignal
  stream?: boolean
}

export interface CallResult {
  text: string
}

const MODEL: Record<'chat' | 'messages' | 'responses', string> = {
  chat: 'gpt-4o-mini',
  messages: 'claude-haiku-4-5',
  responses: 'gpt-4.1',
}

function openaiClient(o: CallOptions): OpenAI {
  return new OpenAI({
    apiKey: o.apiKey ?? 'sk-test',
    baseURL: o.baseURL ?? `${o.root}/v1`,
    defaultHeaders: o.headers,
    ...(o.maxRetries === undefined ? {} : { maxRetries: o.maxRetries }),
  })
}

/**
 * The Agents SDK as its quick start configures it: its provider builds its own
 * `openai` client (its own copy, 7.x, whose retries differ from 6.x: a
 * Retry-After over 60 s falls back to its backoff). No headers can be added
 * that way, so tests route it by path prefix.
 */
async function agentsCall(o: CallOptions, chat: boolean): Promise<CallResult> {
  const modelProvider = new OpenAIProvider({ apiKey: o.apiKey ?? 'sk-test', baseURL: o.baseURL ?? `${o.root}/v1`, useResponses: !chat })
  const agent = new Agent({
    name: 'helper',
    instructions: 'Be brief.',
    model: chat ? MODEL.chat : MODEL.responses,
    modelSettings: { maxTokens: o.maxTokens ?? 100 },
  })
  const runner = new Runner({ modelProvider })
  const input = o.prompt ?? 'Tell me about rate limits.'
  if (o.stream === true) {
    const r = await runner.run(agent, input, { maxTurns: 1, stream: true, signal: o.signal })
    await r.completed
    if (r.error !== null && r.error !== undefined) throw r.error
    return { text: String(r.finalOutput ?? '') }
  }
  const r = await runner.run(agent, input, { maxTurns: 1, signal: o.signal })
  return { text: String(r.finalOutput ?? '') }
}

/** The text of a LangChain message stream. */
async function streamedText(chunks: Promise<AsyncIterable<{ content: unknown }>>): Promise<string> {
  let text = ''
  for await (const c of await chunks) text += typeof c.content === 'string' ? c.content : ''
  return text
}

/** One call of `client` as its documentation shows it; rejects with the client's own error. */
export async function callClient(client: ClientName, o: CallOptions): Promise<CallResult> {
  const prompt = o.prompt ?? 'Tell me about rate limits.'
  const maxTokens = o.maxTokens ?? 100
  const retries = o.maxRetries === undefined ? {} : { maxRetries: o.maxRetries }
  switch (client) {
    case 'openai': {
      const c = openaiClient(o)
      const body = { model: MODEL.chat, messages: [{ role: 'user' as const, content: prompt }], max_tokens: maxTokens }
      if (o.stream === true) {
        const r = await c.chat.completions.stream(body, { signal: o.signal }).finalChatCompletion()
        return { text: r.choices[0]?.message.content ?? '' }
      }
      const r = await c.chat.completions.create(body, { signal: o.signal })
      return { text: r.choices[0]?.message.content ?? '' }
    }
    case 'anthropic': {
      const c = new Anthropic({ apiKey: o.apiKey ?? 'sk-ant-test', baseURL: o.root, defaultHeaders: o.headers, ...retries })
      const body = { model: MODEL.messages, max_tokens: maxTokens, messages: [{ role: 'user' as const, content: prompt }] }
      const r =
        o.stream === true
          ? await c.messages.stream(body, { signal: o.signal }).finalMessage()
          : await c.messages.create(body, { signal: o.signal })
      return { text: r.content.map((b) => (b.type === 'text' ? b.text : '')).join('') }
    }
    case 'ai-openai':
    case 'ai-anthropic':
    case 'ai-compatible': {
      const model =
        client === 'ai-openai'
          ? createOpenAI({ apiKey: o.apiKey ?? 'sk-test', baseURL: o.baseURL ?? `${o.root}/v1`, headers: o.headers }).chat(MODEL.chat)
          : client === 'ai-anthropic'
            ? createAnthropic({ apiKey: o.apiKey ?? 'sk-ant-test', baseURL: `${o.root}/v1`, headers: o.headers })(MODEL.messages)
            : createOpenAICompatible({
                name: 'local',
                apiKey: o.apiKey,
                baseURL: o.baseURL ?? `${o.root}/v1`,
                headers: o.headers,
              }).chatModel(MODEL.chat)
      const args = { model, prompt, maxOutputTokens: maxTokens, abortSignal: o.signal, ...retries }
      if (o.stream === true) {
        let failure: unknown
        const r = streamText({ ...args, onError: ({ error }) => void (failure = error) })
        const text = await r.text
        if (failure !== undefined) throw failure
        return { text }
      }
      return { text: (await generateText(args)).text }
    }
    case 'langchain-openai': {
      const m = new ChatOpenAI({
        model: MODEL.chat,
        apiKey: o.apiKey ?? 'sk-test',
        maxTokens,
        configuration: { baseURL: o.baseURL ?? `${o.root}/v1`, defaultHeaders: o.headers },
        ...retries,
      })
      // `.stream()`, not `streaming: true` with invoke(): that path first counts the prompt with a tiktoken
      // encoding it downloads, retrying for minutes where there is no network.
      if (o.stream === true) return { text: await streamedText(m.stream(prompt, { signal: o.signal })) }
      const r = await m.invoke(prompt, { signal: o.signal })
      return { text: String(r.content) }
    }
    case 'langchain-anthropic': {
      const m = new ChatAnthropic({
        model: MODEL.messages,
        apiKey: o.apiKey ?? 'sk-ant-test',
        anthropicApiUrl: o.root,
        maxTokens,
        clientOptions: { defaultHeaders: o.headers },
        ...retries,
      })
      if (o.stream === true) return { text: await streamedText(m.stream(prompt, { signal: o.signal })) }
      const r = await m.invoke(prompt, { signal: o.signal })
      return { text: typeof r.content === 'string' ? r.content : JSON.stringify(r.content) }
    }
    case 'agents':
      return agentsCall(o, false)
    case 'agents-chat':
      return agentsCall(o, true)
  }
}
