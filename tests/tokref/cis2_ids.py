"""cis2's ids for many strings with one load of the tokenizer (the Python
package over libcis2; `cis2 tokenize` would parse tokenizer.json once per
string): stdin a JSON array of strings, stdout a JSON array with, for each,
its ids or the library's error line. tests/tokref/compare.mjs runs it."""
import json
import sys

import cis2

tok = cis2.Tokenizer(sys.argv[1])
out = []
for s in json.load(sys.stdin):
    try:
        out.append(tok.encode(s))
    except (cis2.Error, ValueError) as e:
        out.append(str(e))
json.dump(out, sys.stdout)
