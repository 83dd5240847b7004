/**
 * `ua:bot` and `ua:bot_category` (docs/behaviour.md §3) from the User-Agent.
 *
 * Whether a User-Agent is a bot at all is the `isbot` package's call: its
 * pattern list is maintained upstream and follows new crawlers and HTTP
 * clients, which a list of our own would not. Which *kind* of bot it is comes
 * from our table of named crawlers below, because no maintained library
 * sorts bots into these categories; a named crawler counts as a bot even if
 * isbot's list were ever to drop it, and every other bot is `other_bot`.
 *
 * Both patterns are compiled once at start-up; the answer per User-Agent is
 * kept in a bounded cache, since a service sees the same few hundred strings
 * over and over and a hit costs one Map lookup instead of two regex scans.
 */
import { isbot } from 'isbot'
import { boundedCache } from '../bounded-cache.js'

export type BotCategory =
  | 'search_engine'
  | 'ai_crawler'
  | 'ai_assistant_user'
  | 'social_preview'
  | 'monitoring_uptime'
  | 'seo_research'
  | 'archiver'
  | 'other_bot'

/**
 * Product tokens of named crawlers, matched case-insensitively anywhere in the
 * User-Agent. A crawler is sorted by what its fetches are for: a search index
 * (search_engine), an AI company's crawl for training or AI search
 * (ai_crawler), a fetch made because a person asked an assistant
 * (ai_assistant_user), a link preview, an uptime probe, an SEO index, an archive.
 */
const NAMED: Record<Exclude<BotCategory, 'other_bot'>, readonly string[]> = {
  search_engine: [
    'Googlebot',
    'Google-InspectionTool',
    'AdsBot-Google',
    'Mediapartners-Google',
    'Storebot-Google',
    'bingbot',
    'BingPreview',
    'adidxbot',
    'Applebot',
    'DuckDuckBot',
    'YandexBot',
    'YandexImages',
    'Baiduspider',
    'Yahoo! Slurp',
    'SeznamBot',
    'Sogou web spider',
    'Exabot',
    'PetalBot',
    'Qwantbot',
    'MojeekBot',
    'Yeti',
    'coccocbot',
  ],
  ai_crawler: [
    'GPTBot',
    'OAI-SearchBot',
    'ClaudeBot',
    'Claude-SearchBot',
    'Claude-Web',
    'anthropic-ai',
    'CCBot',
    'PerplexityBot',
    'Bytespider',
    'meta-externalagent',
    'Google-CloudVertexBot',
    'cohere-ai',
    'Diffbot',
    'YouBot',
    'AI2Bot',
    'Timpibot',
    'ImagesiftBot',
    'PanguBot',
    'MistralAI-Index',
  ],
  ai_assistant_user: ['ChatGPT-User', 'Claude-User', 'Perplexity-User', 'MistralAI-User', 'Meta-ExternalFetcher', 'DuckAssistBot'],
  social_preview: [
    'facebookexternalhit',
    'Facebot',
    'Twitterbot',
    'Slackbot',
    'Slack-ImgProxy',
    'LinkedInBot',
    'Discordbot',
    'TelegramBot',
    'WhatsApp',
    'Pinterestbot',
    'redditbot',
    'Embedly',
    'SkypeUriPreview',
    'vkShare',
    'Iframely',
    'Bluesky Cardyb',
    'Snap URL Preview Service',
  ],
  monitoring_uptime: [
    'UptimeRobot',
    'Pingdom',
    'StatusCake',
    'Site24x7',
    'Better Uptime Bot',
    'BetterStack',
    'Uptime-Kuma',
    'Checkly',
    'NewRelicPinger',
    'DatadogSynthetics',
    'GoogleStackdriverMonitoring',
    'Freshping',
    'HetrixTools',
    'check_http',
    'Monitis',
    'UptimeBot',
  ],
  seo_research: [
    'AhrefsBot',
    'AhrefsSiteAudit',
    'SemrushBot',
    'SiteAuditBot',
    'MJ12bot',
    'DotBot',
    'rogerbot',
    'BLEXBot',
    'DataForSeoBot',
    'serpstatbot',
    'SEOkicks',
    'Screaming Frog SEO Spider',
    'Barkrowler',
    'MegaIndex',
    'SeznamHomepageCrawler',
  ],
  archiver: ['ia_archiver', 'archive.org_bot', 'heritrix', 'special_archiver', 'ArchiveBot', 'Arquivo-web-crawler', 'Wayback Machine'],
}

const CATEGORY = new Map<string, BotCategory>()
for (const [category, tokens] of Object.entries(NAMED)) for (const t of tokens) CATEGORY.set(t.toLowerCase(), category as BotCategory)

// Longest first, so that at one position `Claude-SearchBot` wins over a shorter token sharing its start.
const NAMED_PATTERN = new RegExp(
  [...CATEGORY.keys()]
    .sort((a, b) => b.length - a.length)
    .map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|'),
  'i',
)

/** The category of a bot User-Agent, or undefined for anything isbot does not call a bot. */
export function classifyUserAgent(ua: string): BotCategory | undefined {
  if (ua === '') return undefined
  const m = NAMED_PATTERN.exec(ua)
  if (m !== null) return CATEGORY.get(m[0].toLowerCase())
  return isbot(ua) ? 'other_bot' : undefined
}

/** Distinct User-Agents remembered. */
export const UA_CACHE_ENTRIES = 8192
/**
 * Longer User-Agents are classified every time rather than cached: a client
 * sending random 8 KB strings must not make the cache hold megabytes. Real
 * User-Agents are a few hundred characters.
 */
export const UA_CACHE_MAX_LENGTH = 512

const NOT_A_BOT = ''
const cache = boundedCache<string, BotCategory | typeof NOT_A_BOT>(UA_CACHE_ENTRIES)

/** classifyUserAgent through the cache of recent User-Agents; `''` when not a bot. */
export function botCategory(ua: string | undefined): BotCategory | '' {
  if (ua === undefined || ua === '') return NOT_A_BOT
  if (ua.length > UA_CACHE_MAX_LENGTH) return classifyUserAgent(ua) ?? NOT_A_BOT
  let c = cache.get(ua)
  if (c === undefined) {
    c = classifyUserAgent(ua) ?? NOT_A_BOT
    cache.set(ua, c)
  }
  return c
}
