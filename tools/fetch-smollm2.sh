#!/usr/bin/env bash
# Download the three sha256-pinned SmolLM2-135M files (CIS-2 §2.1) from the
# model's public resolve/main URLs into models/SmolLM2-135M/ and check them.
# For users with internet access; exits non-zero on any failure or mismatch.
set -eu
dest="${1:-models/SmolLM2-135M}"
base="https://huggingface.co/HuggingFaceTB/SmolLM2-135M/resolve/main"
mkdir -p "$dest"
fetch() {  # fetch FILE SHA256
    local f="$1" want="$2" got
    if [ -f "$dest/$f" ] && [ "$(sha256sum "$dest/$f" | cut -c1-64)" = "$want" ]; then
        echo "have $f (sha256 ok)"; return 0
    fi
    echo "fetching $f"
    if command -v curl >/dev/null; then curl -fsSL --connect-timeout 10 --retry 2 -o "$dest/$f.part" "$base/$f"
    elif command -v wget >/dev/null; then wget -q -T 10 -O "$dest/$f.part" "$base/$f"
    else echo "fetch-smollm2: need curl or wget" >&2; return 1; fi
    got=$(sha256sum "$dest/$f.part" | cut -c1-64)
    if [ "$got" != "$want" ]; then
        echo "fetch-smollm2: $f: sha256 $got does not match the pinned $want (§2.1)" >&2
        rm -f "$dest/$f.part"; return 1
    fi
    mv "$dest/$f.part" "$dest/$f"
}
fetch config.json 1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843
fetch tokenizer.json 9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c
fetch model.safetensors 80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1
echo "SmolLM2-135M ready in $dest"
