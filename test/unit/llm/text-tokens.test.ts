/**
 * The script-aware token estimate (docs/llm.md "Counting"): characters / 4 for ASCII, and for the
 * other scripts a count between OpenAI's o200k_base and cl100k_base counts of the same sentence
 * (never a quarter of it, as characters / 4 gave CJK), rounded up.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { tokenCounter } from '../../../src/llm/estimate.js'
import { textTokens, textWeight } from '../../../src/llm/text-tokens.js'

const SAMPLES: Record<string, string> = {
  french:
    'Les limites de débit gardent la capacité partagée du modèle équitable pour chaque locataire, et elles arrêtent un client emballé.',
  russian:
    'Ограничения скорости сохраняют общую мощность модели справедливой для каждого арендатора и останавливают вышедшего из-под контроля клиента.',
  greek: 'Τα όρια ρυθμού διατηρούν δίκαιη την κοινή χωρητικότητα του μοντέλου για κάθε ενοικιαστή.',
  arabic: 'تحافظ حدود المعدل على عدالة سعة النموذج المشتركة لكل مستأجر، وتوقف العميل الخارج عن السيطرة.',
  hebrew: 'מגבלות קצב שומרות על הוגנות קיבולת המודל המשותפת לכל דייר, ועוצרות לקוח שיצא משליטה.',
  hindi: 'दर सीमाएँ हर किरायेदार के लिए साझा मॉडल क्षमता को निष्पक्ष रखती हैं और नियंत्रण से बाहर ग्राहक को रोकती हैं।',
  thai: 'ขีดจำกัดอัตราทำให้ความจุของโมเดลที่ใช้ร่วมกันยุติธรรมสำหรับผู้เช่าทุกราย และหยุดลูกค้าที่ควบคุมไม่ได้',
  chinese: '速率限制让每个租户公平地共享模型容量，并阻止失控的客户端在几分钟内花光全部预算。我们在网关中按令牌计数。',
  japanese:
    'レート制限は、すべてのテナントにとって共有モデルの容量を公平に保ち、暴走したクライアントが数分で予算全体を使い切るのを防ぎます。',
  korean:
    '속도 제한은 모든 테넌트에게 공유 모델 용량을 공정하게 유지하고, 통제 불능 클라이언트가 몇 분 만에 전체 예산을 소진하는 것을 막습니다.',
  emoji: '🚀🔥✨👍😀🎉💡📈🤖🧠 ok 👋🌍🙂',
}

test('ASCII is characters / 4, rounded up', () => {
  assert.equal(textTokens(''), 0)
  assert.equal(textTokens('abcd'), 1)
  assert.equal(textTokens('abcde'), 2)
  assert.equal(textWeight('x'.repeat(10)), 2.5)
})

test('every other script lands between the o200k_base and cl100k_base counts, never at a quarter a character', () => {
  const o200k = tokenCounter('o200k_base')
  const cl100k = tokenCounter('cl100k_base')
  for (const [script, text] of Object.entries(SAMPLES)) {
    const n = textTokens(text)
    const low = o200k(text)
    const high = cl100k(text)
    assert.ok(n >= low * 0.95 && n <= Math.max(high, low * 2) * 1.15, `${script}: ${n}, o200k ${low}, cl100k ${high}`)
    assert.ok(n > Math.ceil([...text].length / 4), `${script} above characters / 4`)
  }
})

test('a surrogate pair is one code point of weight 2; a lone surrogate counts too', () => {
  assert.equal(textTokens('🚀'), 2)
  assert.equal(textTokens('\udc00'), 2)
  assert.equal(textTokens('漢字'), 2)
})
