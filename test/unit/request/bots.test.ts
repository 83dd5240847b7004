/** ua:bot and ua:bot_category over real User-Agent strings (docs/behaviour.md §3). */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { botCategory, classifyUserAgent, UA_CACHE_MAX_LENGTH } from '../../../src/request/bots.js'
import { compileDescriptor } from '../../../src/request/descriptors.js'
import { boundedCache } from '../../../src/bounded-cache.js'
import { view } from '../../helpers/engine-harness.js'

type Row = [string, string, string | undefined]

/** [what, User-Agent, expected category (undefined: not a bot)]. */
const TABLE: Row[] = [
  // Browsers and mobile apps: not bots.
  [
    'Chrome on Windows',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
    undefined,
  ],
  ['Firefox on Linux', 'Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0', undefined],
  [
    'Safari on macOS',
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15',
    undefined,
  ],
  [
    'Edge',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.51',
    undefined,
  ],
  [
    'Safari on iPhone',
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1',
    undefined,
  ],
  [
    'Chrome on Android',
    'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36',
    undefined,
  ],
  [
    'Samsung Internet',
    'Mozilla/5.0 (Linux; Android 13; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36',
    undefined,
  ],
  [
    'Opera',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36 OPR/109.0.0.0',
    undefined,
  ],
  [
    'Facebook in-app browser on iOS',
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/456.0.0.35.109;FBBV/585432710;FBDV/iPhone15,2;FBMD/iPhone;FBSN/iOS;FBSV/17.4;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]',
    undefined,
  ],
  [
    'Instagram app on Android',
    'Instagram 309.0.0.40.113 Android (33/13; 420dpi; 1080x2400; samsung; SM-S911B; dm1q; qcom; en_US; 541635863)',
    undefined,
  ],
  ['Android app on Dalvik', 'Dalvik/2.1.0 (Linux; U; Android 13; Pixel 7 Build/TQ3A.230805.001)', undefined],
  ['iOS app with CFNetwork', 'Spotify/8.9.10 iOS/17.4 (iPhone15,2)', undefined],
  ['iOS app (Alamofire style)', 'MyShop/4.2.1 (com.example.shop; build:812; iOS 17.4.1) Alamofire/5.8.1', undefined],
  // HTTP clients and scripts: bots, of no named kind.
  ['curl', 'curl/8.4.0', 'other_bot'],
  ['Wget', 'Wget/1.21.4', 'other_bot'],
  ['python-requests', 'python-requests/2.31.0', 'other_bot'],
  ['Go net/http', 'Go-http-client/1.1', 'other_bot'],
  ['okhttp', 'okhttp/4.12.0', 'other_bot'],
  ['axios', 'axios/1.6.7', 'other_bot'],
  ['Postman', 'PostmanRuntime/7.36.0', 'other_bot'],
  [
    'headless Chrome',
    'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36',
    'other_bot',
  ],
  // Search engines.
  ['Googlebot (desktop)', 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)', 'search_engine'],
  [
    'Googlebot (smartphone)',
    'Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.118 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
    'search_engine',
  ],
  ['Googlebot-Image', 'Googlebot-Image/1.0', 'search_engine'],
  [
    'Bingbot',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36',
    'search_engine',
  ],
  [
    'Applebot',
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)',
    'search_engine',
  ],
  ['YandexBot', 'Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)', 'search_engine'],
  ['DuckDuckBot', 'DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)', 'search_engine'],
  ['Baiduspider', 'Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)', 'search_engine'],
  // AI crawlers.
  ['GPTBot', 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)', 'ai_crawler'],
  [
    'OAI-SearchBot',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot',
    'ai_crawler',
  ],
  ['ClaudeBot', 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)', 'ai_crawler'],
  ['CCBot', 'CCBot/2.0 (https://commoncrawl.org/faq/)', 'ai_crawler'],
  [
    'PerplexityBot',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)',
    'ai_crawler',
  ],
  [
    'Bytespider',
    'Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)',
    'ai_crawler',
  ],
  ['meta-externalagent', 'meta-externalagent/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)', 'ai_crawler'],
  // Fetches made for a person using an assistant.
  [
    'ChatGPT-User',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot',
    'ai_assistant_user',
  ],
  [
    'Claude-User',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)',
    'ai_assistant_user',
  ],
  [
    'Perplexity-User',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Perplexity-User/1.0; +https://perplexity.ai/perplexity-user)',
    'ai_assistant_user',
  ],
  // Link previews.
  ['facebookexternalhit', 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)', 'social_preview'],
  ['Twitterbot', 'Twitterbot/1.0', 'social_preview'],
  ['Slackbot', 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)', 'social_preview'],
  ['LinkedInBot', 'LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)', 'social_preview'],
  ['Discordbot', 'Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)', 'social_preview'],
  ['TelegramBot', 'TelegramBot (like TwitterBot)', 'social_preview'],
  ['WhatsApp', 'WhatsApp/2.23.20.0 A', 'social_preview'],
  // Uptime monitors.
  ['UptimeRobot', 'Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)', 'monitoring_uptime'],
  ['Pingdom', 'Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)', 'monitoring_uptime'],
  [
    'StatusCake',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/99.0.4844.84 Safari/537.36 StatusCake',
    'monitoring_uptime',
  ],
  ['Site24x7', 'Site24x7', 'monitoring_uptime'],
  // SEO indexes.
  ['AhrefsBot', 'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)', 'seo_research'],
  ['SemrushBot', 'Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)', 'seo_research'],
  ['MJ12bot', 'Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)', 'seo_research'],
  ['DotBot', 'Mozilla/5.0 (compatible; DotBot/1.2; +https://opensiteexplorer.org/dotbot; help@moz.com)', 'seo_research'],
  // Archives.
  ['ia_archiver', 'ia_archiver (+http://www.alexa.com/site/help/webmasters; crawler@alexa.com)', 'archiver'],
  ['archive.org_bot', 'Mozilla/5.0 (compatible; archive.org_bot +http://archive.org/details/archive.org_bot)', 'archiver'],
]

test('the table holds at least 40 User-Agents and every category', () => {
  assert.ok(TABLE.length >= 40)
  const seen = new Set(TABLE.map((r) => r[2]))
  for (const c of [
    undefined,
    'search_engine',
    'ai_crawler',
    'ai_assistant_user',
    'social_preview',
    'monitoring_uptime',
    'seo_research',
    'archiver',
    'other_bot',
  ])
    assert.ok(seen.has(c), String(c))
})

const bot = compileDescriptor('ua:bot')
const category = compileDescriptor('ua:bot_category')
assert.ok(bot.ok && category.ok)

for (const [what, ua, want] of TABLE) {
  test(`User-Agent: ${what} → ${want ?? 'not a bot'}`, () => {
    assert.equal(classifyUserAgent(ua), want)
    // Twice through a request: the second answer comes from the cache and must be the same.
    for (let i = 0; i < 2; i++) {
      const v = view({ headers: { 'User-Agent': ua } })
      assert.equal(bot.extract(v), want === undefined ? 'false' : 'true')
      assert.equal(category.extract(v), want, 'ua:bot_category is missing for a non-bot')
    }
  })
}

test('no User-Agent or an empty one: not a bot, and no category', () => {
  for (const headers of [{}, { 'User-Agent': '' }] as Record<string, string>[]) {
    const v = view({ headers })
    assert.equal(bot.extract(v), 'false')
    assert.equal(category.extract(v), undefined)
  }
})

test('the token is matched case-insensitively anywhere in the string', () => {
  assert.equal(classifyUserAgent('my-fetcher (GPTBOT compatible)'), 'ai_crawler')
  assert.equal(classifyUserAgent('foo gptbot/1.0'), 'ai_crawler')
})

test('a very long User-Agent is classified but not cached', () => {
  const long = `${'Mozilla/5.0 '.repeat(Math.ceil(UA_CACHE_MAX_LENGTH / 12) + 1)}(compatible; ClaudeBot/1.0)`
  assert.ok(long.length > UA_CACHE_MAX_LENGTH)
  assert.equal(botCategory(long), 'ai_crawler')
})

test('boundedCache: at most max entries, the least recently used goes first', () => {
  const c = boundedCache<string, number>(3)
  for (let i = 0; i < 3; i++) c.set(`k${i}`, i)
  assert.equal(c.get('k0'), 0, 'k0 used again: k1 is now the least recent')
  c.set('k3', 3)
  assert.equal(c.get('k1'), undefined)
  assert.deepEqual([c.get('k0'), c.get('k2'), c.get('k3')], [0, 2, 3])
  assert.equal(c.size, 3)
})
