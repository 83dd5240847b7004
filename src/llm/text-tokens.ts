/**
 * Tokens of a text without a tokenizer (`simple_word` prompts, and stream
 * deltas of rules without `tokenizer`; docs/llm.md "Counting"): characters / 4
 * holds for ASCII, but BPE tokenizers spend far more on other scripts, and a
 * CJK reply counted at a quarter of a token a character is cut four times
 * late. So each code point weighs what it costs, set between OpenAI's
 * o200k_base and cl100k_base counts of the same sentence in each script
 * (measured in test/unit/llm/text-tokens.test.ts): ASCII 1/4; Latin, Greek,
 * Cyrillic and other alphabets 0.4; Hebrew, Arabic 0.5; Indic and South-East
 * Asian scripts 0.6; CJK, kana, Hangul and other BMP symbols 1; emoji and
 * anything outside the BMP 2 per code point. The sum is rounded up.
 */

/** Weight of one BMP code unit that is not ASCII. */
function weight(c: number): number {
  if (c < 0x0590) return 0.4 // Latin-1, Latin Extended, IPA, Greek, Cyrillic, Armenian
  if (c < 0x0900) return 0.5 // Hebrew, Arabic, Syriac, Thaana, NKo
  if (c < 0x1100) return 0.6 // Indic scripts, Thai, Lao, Tibetan, Myanmar, Georgian
  if (c >= 0x1e00 && c < 0x2000) return 0.4 // Latin Extended Additional, Greek Extended
  return 1 // Hangul Jamo, CJK, kana, Hangul syllables, symbols, dingbats, fullwidth forms
}

/** A character past ASCII (none, the common case: one regex test, then characters / 4). */
const NON_ASCII = /[\u0080-\uffff]/

/** The unrounded tokens of `text` (to sum over the parts of a prompt, rounded once). */
export function textWeight(text: string): number {
  if (!NON_ASCII.test(text)) return text.length / 4
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) n += 0.25
    else if (c >= 0xd800 && c < 0xdc00) {
      // A surrogate pair: emoji, rare CJK; one code point.
      n += 2
      i++
    } else if (c >= 0xdc00 && c < 0xe000)
      n += 2 // a lone low surrogate
    else n += weight(c)
  }
  return n
}

/** Tokens of `text`, rounded up (the float sum's noise below a millionth of a token ignored). */
export function textTokens(text: string): number {
  return roundTokens(textWeight(text))
}

export function roundTokens(weight: number): number {
  return Math.max(0, Math.ceil(weight - 1e-9))
}
