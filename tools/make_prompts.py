#!/usr/bin/env python3
"""A deterministic JSONL prompt set for `cis2 batch` tests and examples.

    python3 tools/make_prompts.py OUT.jsonl [N] [--vocab V]

Line k (0-based): id "pKK"; every 4th a "prompt_ids" list of 1..9 ids below V,
the others a "prompt" text (ASCII and raw UTF-8, tabs, quotes, newlines, half
of them written with \\u escapes); "max_tokens" 1..17 on two lines in three
(the others take the -n default); "stop_at_eos": true on every 5th.
"""
import argparse
import json

WORDS = ["Once", "upon", "a", "time", "there", "was", "a", "tiny", "model", "ünïcode", "✓",
         "日本語", "tab\tand \"quotes\"", "line\nbreak"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("n", nargs="?", type=int, default=40)
    ap.add_argument("--vocab", type=int, default=320)
    a = ap.parse_args()
    lines = []
    for k in range(a.n):
        o = {"id": "p%02d" % k}
        if k % 4 == 3:
            o["prompt_ids"] = [(7 * k + 13 * j) % a.vocab for j in range(1 + k % 9)]
        else:
            o["prompt"] = " ".join(WORDS[(k + j) % len(WORDS)] for j in range(1 + k % 7))
        if k % 3 != 0:
            o["max_tokens"] = 1 + (5 * k) % 17
        if k % 5 == 2:
            o["stop_at_eos"] = True
        lines.append(json.dumps(o, ensure_ascii=(k % 2 == 0)))
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
