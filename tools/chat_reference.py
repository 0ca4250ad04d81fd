#!/usr/bin/env python3
"""The second reading of cis2's chat rendering (src/model/chat.c): the real
Jinja2 engine, set up as HF transformers' apply_chat_template sets it up
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols),
rendering each template in tests/fixtures/chat/*.jinja (but refused-*) with
each messages-*.json, with and without the generation prompt.

Usage: chat_reference.py DIR > DIR/expected.txt
  lines: TEMPLATE MESSAGES ADD_GENERATION_PROMPT HEX(rendered bytes)
Needs python3-jinja2 (Debian); exits 3 when it is not installed.
"""
import glob, json, os, sys

try:
    import jinja2, jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print('jinja2 not installed (apt-get install python3-jinja2)', file=sys.stderr)
    sys.exit(3)


def main(d):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters['tojson'] = lambda x, **k: json.dumps(x, ensure_ascii=False, **k)
    for tp in sorted(glob.glob(os.path.join(d, '*.jinja'))):
        name = os.path.basename(tp)[:-6]
        if name.startswith('refused-'): continue
        tpl = env.from_string(open(tp, encoding='utf-8').read())
        for mp in sorted(glob.glob(os.path.join(d, 'messages-*.json'))):
            msgs = json.load(open(mp, encoding='utf-8'))['messages']
            for gen in (0, 1):
                out = tpl.render(messages=msgs, add_generation_prompt=bool(gen), tools=None,
                                 documents=None, bos_token='<|endoftext|>',
                                 eos_token='<|im_end|>')
                print(name, os.path.basename(mp), gen, out.encode('utf-8').hex())


if __name__ == '__main__':
    main(sys.argv[1])
