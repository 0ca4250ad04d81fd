// Hugging Face tokenizers (the Node binding of the Rust crate) against cis2,
// on the real tokenizer.json of a model: the same ids for every string of a
// corpus made here, deterministically (tests/t_tokenizer_hf.sh).
//   node tests/tokref/compare.mjs CIS2 TOKENIZER.json NAME
// cis2's ids: every string through the library (tests/tokref/cis2_ids.py, one
// load; python/ on PYTHONPATH), and the first CLI_N through `cis2 tokenize
// --tokenizer FILE` itself (one load each).
// Prints "NAME: N strings, M equal (K also by the CLI)" and, for up to 5 that
// differ, the string and the id lists; exits 1 when any differs or cis2
// refuses a string.
// encode(..., {addSpecialTokens: false}) is what `cis2 tokenize` does (§3.3):
// nothing is added to the ids, but special-token text in the string is still
// read as that token, by both.
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const [cis2, file, name] = process.argv.slice(2);

// xorshift32: the same corpus on every run and machine.
let st = 0x2545f491;
const rnd = (n) => {
    st ^= st << 13;
    st >>>= 0;
    st ^= st >>> 17;
    st ^= st << 5;
    st >>>= 0;
    return st % n;
};
const pick = (a) => a[rnd(a.length)];

const fixed = [
    'Once upon a time', 'Hello, world!', 'The quick brown fox jumps over the lazy dog.',
    "I'm sure you'll see: they've done it, she's here, we'd go, it's 'quoted'.",
    "DON'T SHOUT, I'LL HEAR YOU'RE THERE", "'twas the night", 'rock \'n\' roll',
    '1', '12', '123', '1234', '12345', '123456789012345678901234567890', '3.14159265358979',
    '-42', '1,000,000', '2026-12-07T06:53:34Z', '0x7fffffff', 'v1.2.3-rc.4', '$19.99', '100%',
    ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n ', 'a  b', 'a   b', 'end   ', '   start',
    'tab\there', 'line1\nline2\r\nline3', 'x\n\n\n\ny', '  \n\t  \n',
    'def f(x):\n    return x ** 2\n', 'int main(void) { return 0; }', 'for (i = 0; i < n; i++) {}',
    'const x = [1, 2, 3].map((y) => y * 2);', '<div class="a">b</div>', '{"key": [1, 2.5, null]}',
    'SELECT * FROM t WHERE id = 42;', '#include <stdio.h>', 'a+=b; c-=d; e*=f;', '// comment',
    '日本語のテキストです。', '中文文本，包括标点。', '한국어 텍스트입니다.', 'Привет, мир!',
    'Γειά σου Κόσμε', 'שלום עולם', 'مرحبا بالعالم', 'नमस्ते दुनिया', 'สวัสดีชาวโลก',
    'café naïve résumé façade Ångström', 'Crème brûlée à la mode', 'Zürich Straße Œuvre',
    'e\u0301 (decomposed e-acute)', 'ﬁ ligature', 'emoji 😀🎉👍🏽 and 👨‍👩‍👧‍👦 family',
    '🤗 Transformers', '🇫🇷🇩🇪', 'mixed 中文 and English 和 123 数字', 'ÀÉÎÕÜ',
    // words Llama 3's vocab has whole that its merges would split (ignore_merges)
    'Tiếng Việt: việc hợp nhiều điều, nhiên biệt nhiệm hiểu biểu nhanh ngoài',
    'geliştirmektedir oluşturulmuş değiş ulaş kaldıldı yapılmış', 'характер практика культура',
    'використання розвиток виробництво', ' ایران اطلاعات', '.:.:.:.:.:.:.:.:', 'jeho každý zdrav',
    '<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
    'text <|eot_id|> more', '<|eot_id', '|eot_id|>', '<|im_start|>user\nhi<|im_end|>', '<think>',
    '</think>', '<|endoftext|>', 'a<|eot_id|><|eot_id|>b',
];

const words = [
    'the', 'of', 'and', 'tokenizer', 'model', 'inference', 'exact', 'bit', 'Llama', 'Qwen',
    'hello', 'world', 'über', 'naïve', 'déjà', 'vu', '日本', '東京', '北京', '서울', 'Москва',
    'λόγος', 'שלום', 'سلام', 'हिन्दी', 'ไทย', '😀', '🚀', '∑', '→', '€', '£', '©', 'ß', 'Ω',
    ' việc', ' Việt', 'mektedir', ' характер', ' oluştur', ' hiểu', 'ılmış', 'don\'t', 'It\'s', 'WE\'LL', 'x', 'y2', 'i18n', 'README.md', 'C++', 'O(n)', 'https://example.com/a?b=c',
    'foo_bar', 'fooBar', 'FOO', '__init__', '\\n', '@user', '#tag', '...', '?!', '--', '==',
    '<|eot_id|>', '<|begin_of_text|>', '<|im_end|>',
];
const seps = [' ', ' ', ' ', ' ', '  ', '\n', '\t', ', ', '. ', '', '\n\n', ' \n', '   '];
const digits = () => {
    let s = String(1 + rnd(9));
    for (let k = rnd(24); k > 0; k--) s += rnd(10);
    return s;
};
const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x5d0, 0x5ea],
                [0x620, 0x64a], [0x905, 0x939], [0x3041, 0x3096], [0x30a1, 0x30fa],
                [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0x1f600, 0x1f64f], [0x2000, 0x206f]];
const randChars = () => {
    let s = '';
    for (let k = 1 + rnd(12); k > 0; k--) {
        const [a, b] = pick(ranges);
        s += String.fromCodePoint(a + rnd(b - a + 1));
    }
    return s;
};
const CLI_N = 24;
const corpus = [...fixed];
while (corpus.length < 600) {
    let s = '';
    for (let k = 1 + rnd(14); k > 0; k--) {
        const r = rnd(10);
        s += (r < 6 ? pick(words) : r < 8 ? digits() : randChars()) + pick(seps);
    }
    corpus.push(s);
}
// one text over 4 kB, where cis2 caches each word's ids for the rest of the call
corpus.push(fixed.join(' ').repeat(3));

const tok = Tokenizer.fromFile(file);
const lib = spawnSync('python3', [new URL('cis2_ids.py', import.meta.url).pathname, file],
                      { input: JSON.stringify(corpus), encoding: 'utf8', maxBuffer: 1 << 26 });
if (lib.status !== 0) {
    console.log(name + ': cis2_ids.py exited ' + lib.status + ': ' + lib.stderr.trim().split('\n').pop());
    process.exit(1);
}
const libIds = JSON.parse(lib.stdout);
let equal = 0, cli = 0, shown = 0;
for (let i = 0; i < corpus.length; i++) {
    const s = corpus[i];
    const want = (await tok.encode(s, null, { addSpecialTokens: false })).getIds().join(',');
    const got = Array.isArray(libIds[i]) ? libIds[i].join(',') : 'cis2 refused: ' + libIds[i];
    let gotCli = got;
    if (i < CLI_N) {
        const r = spawnSync(cis2, ['tokenize', '--tokenizer', file, '--', s], { encoding: 'utf8' });
        gotCli = r.status === 0 ? r.stdout.trim() : 'cis2 exit ' + r.status + ': ' + r.stderr.trim();
        cli += gotCli === want;
    }
    if (got === want && gotCli === want) equal++;
    else if (shown++ < 5)
        console.log(name + ': differs on ' + JSON.stringify(s) + '\n  hf   ' + want + '\n  lib  ' + got +
                    (i < CLI_N ? '\n  cli  ' + gotCli : ''));
}
console.log(name + ': ' + corpus.length + ' strings, ' + equal + ' equal (' + cli + ' of ' + CLI_N +
            ' also by cis2 tokenize)');
process.exit(equal === corpus.length ? 0 : 1);
