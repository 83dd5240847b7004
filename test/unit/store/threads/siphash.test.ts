/**
 * SipHash against the published vectors: key 00 01 … 0f, messages of 0 to 63
 * bytes 00 01 02 …, outputs as little-endian bytes. SipHash-2-4 from the
 * reference implementation's vectors.h (github.com/veorq/SipHash), SipHash-1-3
 * from Rust's core tests (library/core/tests/hash/sip.rs), over a string of one
 * byte per character. The key path (`wide`) is the same function over the
 * string's UTF-16LE bytes.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { sipHash, sipKey } from '../../../../src/store/threads/siphash.js'

const SIP24 = `
    310e0edd47db6f72 fd67dc93c539f874 5a4fa9d909806c0d 2d7efbd796666785
    b7877127e09427cf 8da699cd64557618 cee3fe586e46c9cb 37d1018bf50002ab
    6224939a79f5f593 b0e4a90bdf82009e f3b9dd94c5bb5d7a a7ad6b22462fb3f4
    fbe50e86bc8f1e75 903d84c02756ea14 eef27a8e90ca23f7 e545be4961ca29a1
    db9bc2577fcc2a3f 9447be2cf5e99a69 9cd38d96f0b3c14b bd6179a71dc96dbb
    98eea21af25cd6be c7673b2eb0cbf2d0 883ea3e395675393 c8ce5ccd8c030ca8
    94af49f6c650adb8 eab8858ade92e1bc f315bb5bb835d817 adcf6b0763612e2f
    a5c91da7acaa4dde 716595876650a2a6 28ef495c53a387ad 42c341d8fa92d832
    ce7cf2722f512771 e37859f94623f3a7 381205bb1ab0e012 ae97a10fd434e015
    b4a31508beff4d31 81396229f0907902 4d0cf49ee5d4dcca 5c73336a76d8bf9a
    d0a704536ba93e0e 925958fcd6420cad a915c29bc8067318 952b79f3bc0aa6d4
    f21df2e41d4535f9 87577519048f53a9 10a56cf5dfcd9adb eb75095ccd986cd0
    51a9cb9ecba312e6 96afadfc2ce666c7 72fe52975a4364ee 5a1645b276d592a1
    b274cb8ebf87870a 6f9bb4203de7b381 eaecb2a30b22a87f 9924a43cc1315724
    bd838d3aafbf8db7 0b1a2a3265d51aea 135079a3231ce660 932b2846e4d70666
    e1915f5cb1eca46c f325965ca16d629f 575ff28e60381be5 724506eb4c328a95`

const SIP13 = `
    dcc40f055801acab 93ca577df39bf4c9 4dd4c74d029bcb82 fbf7dde7b80af88b
    2883d388605775cf 673b53492fd5f9de a7229fc5502b0dc5 4011b19b987d92d3
    8e9a298d11959036 e43d066cb38ea425 7f09ff92ee85de79 52c34df9c118c170
    a2d9b457b184a378 a7ff29120c766f30 345df9c011a15a60 5699512a6dd820d3
    668b907d1add4fcc 0cd8db639068f29c 3ee673b49c38fc8f 1c7d298de59d1ff2
    40e0cca6462fdcc0 44f8452bfeab92b9 2e8720a39b7bfe7f 23c1e6da7f0e5a52
    8c9c3467b2ae64f4 79095b702859cd45 a51399cae3353e3a 353bde4a4ec71da9
    0dd06cef02ed0bfb f4e1b14ab43cd988 63e6c543d6110f54 bcd1218c1fdd7023
    0db6a7166c7b1581 bff98f7ae5b9544d 3e752a1f78129f75 916b18bfbea3a1ce
    0662a2add308f52c 5730c3a32d1c10b6 a1363aae9674f4b3 9283107b54576b62
    3115e4993236d2c1 44d91a3f92c17c66 258813c8fe4f7065 a64989c2d180f224
    6b87f8faed1ccac2 9621049ffc4b16c2 23d6b168939c6ea1 fd14518b9c16fb49
    464c07dff843319f b386cc1224affdc6 8f09520ad149af7e 9a2f299d5513f31c
    121ff4a2dd304ac4 d01ea74389e9fa36 e6bcf0734cb38f31 80e9a77036bf7aa2
    756d3c24dbc0bcb4 1315b7fd52d8f823 088a7da64d5f038f 48f1e8b7e5d09cd8
    ee44a6f7bce6f4f6 f237180fd89ac5ae e094664b15f6b2c3 a8b3bbb76290199d`

const KEY = sipKey(Uint8Array.from({ length: 16 }, (_, i) => i))

/** out (high, low halves) as the little-endian hex of the 64-bit value. */
function leHex(out: Int32Array): string {
  const b = Buffer.alloc(8)
  b.writeInt32LE(out[1]!, 0)
  b.writeInt32LE(out[0]!, 4)
  return b.toString('hex')
}

for (const [name, c, d, table] of [
  ['SipHash-2-4', 2, 4, SIP24],
  ['SipHash-1-3', 1, 3, SIP13],
] as const) {
  test(`${name}: the 64 published vectors`, () => {
    const vectors = table.trim().split(/\s+/)
    assert.equal(vectors.length, 64)
    const out = new Int32Array(2)
    for (let n = 0; n < 64; n++) {
      sipHash(KEY, String.fromCharCode(...Array.from({ length: n }, (_, i) => i)), false, c, d, out, 0)
      assert.equal(leHex(out), vectors[n], `${n} bytes`)
    }
  })
}

test('a string hashes as its UTF-16LE bytes (every tail length, surrogates, lone halves)', () => {
  const a = new Int32Array(2)
  const b = new Int32Array(2)
  const k = sipKey(randomBytes(16))
  const samples = ['', 'a', 'ab', 'abc', 'abcd', 'abcde', 'tb:per_ip:203.0.113.9', 'é€😀', '\ud800x', '\u0000\uffff'.repeat(37)]
  for (let n = 0; n < 40; n++) samples.push(randomBytes(n).toString('latin1'))
  for (const s of samples) {
    sipHash(k, s, true, 1, 3, a, 0)
    sipHash(k, Buffer.from(s, 'utf16le').toString('latin1'), false, 1, 3, b, 0)
    assert.deepEqual([...a], [...b], JSON.stringify(s))
  }
})

test('the key changes the hash: one input, 1,000 random keys, 1,000 distinct hashes', () => {
  const out = new Int32Array(2)
  const seen = new Set<string>()
  for (let i = 0; i < 1000; i++) {
    sipHash(sipKey(randomBytes(16)), 'tb:per_ip:127.0.0.1', true, 1, 3, out, 0)
    seen.add(leHex(out))
  }
  assert.equal(seen.size, 1000)
})

test('a key is 16 bytes', () => {
  assert.throws(() => sipKey(new Uint8Array(8)), RangeError)
})
