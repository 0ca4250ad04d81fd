// Hugging Face tokenizers' ids for rendered chat prompts (tests/t_chat_template.sh):
//   node tests/tokref/chat_ids.mjs TOKENIZER.json HEXFILE
// HEXFILE holds one prompt per line as the hex of its UTF-8 bytes; prints one
// line of comma-separated ids per prompt, encoded as apply_chat_template
// tokenizes a rendered template: add_special_tokens=False (special-token
// text in the prompt is still read as that token).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const [file, hexfile] = process.argv.slice(2);
const tok = Tokenizer.fromFile(file);
const lines = readFileSync(hexfile, 'utf8').split('\n').filter((l) => l.length);
for (const h of lines) {
    const text = Buffer.from(h, 'hex').toString('utf8');
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    console.log(enc.getIds().join(','));
}
