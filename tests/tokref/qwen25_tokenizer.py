"""Qwen2.5's tokenizer.json from Qwen3's (tests/t_tokenizer_hf.sh, tests/t_chat_template.sh):
  python3 tests/tokref/qwen25_tokenizer.py QWEN3_TOKENIZER.json OUT.json
The two releases share the normalizer (NFC), the pre-tokenizer (Qwen2's Split regex, then
ByteLevel), the post-processor, the decoder and the BPE model (151,643 vocab entries and
their merges); Qwen3 only appends four added tokens, none of them special: <tool_response>,
</tool_response>, <think>, </think> (ids 151665-151668). Qwen2.5's added tokens are
Qwen3's first 22 (ids 151643-151664, <|endoftext|> to <|file_sep|>), so without the four,
"<think>" is plain text there and the BPE spells it, as it does for Qwen2.5 itself."""
import json
import sys

QWEN3_ONLY = ["<tool_response>", "</tool_response>", "<think>", "</think>"]

d = json.load(open(sys.argv[1], encoding="utf-8"))
added = d["added_tokens"]
last = [t["content"] for t in added[-4:]]
if last != QWEN3_ONLY or [t["id"] for t in added[-4:]] != list(range(151665, 151669)) or \
        len(added) != 26 or added[0]["content"] != "<|endoftext|>" or added[0]["id"] != 151643:
    sys.exit("%s: not Qwen3's tokenizer.json (its last added tokens are %s)" % (sys.argv[1], last))
d["added_tokens"] = added[:-4]
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
