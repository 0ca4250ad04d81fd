#!/usr/bin/env python3
"""The second reading of cis2's Jinja subset (src/model/jinja_*.c): Jinja2
itself, set up as HF transformers' apply_chat_template sets it up
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols;
tojson as json.dumps with ensure_ascii=False; raise_exception; strftime_now),
except that strftime_now formats a given date instead of the clock (and is
undefined without one), as cis2 pins it.

Usage:
  hf_jinja.py cases OUT.jsonl      the engine case table (tests/unit_jinja.c)
  hf_jinja.py chat CASES           lines as tests/unit_jinja.c --chat reads
                                   them; prints the rendering's hex or "ERR"
Needs python3-jinja2 (Debian); exits 3 when it is not installed.
"""
import datetime, json, os, sys

try:
    import jinja2, jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print('jinja2 not installed (apt-get install python3-jinja2)', file=sys.stderr)
    sys.exit(3)


def make_env(date=None):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    if date:
        day = datetime.date.fromisoformat(date)
        env.globals['strftime_now'] = lambda fmt: day.strftime(fmt)
    return env


SPECIAL = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token',
           'mask_token', 'additional_special_tokens']


def special_tokens(cfg):
    """transformers' special_tokens_map: the tokens tokenizer_config.json sets."""
    out = {}
    for k in SPECIAL:
        v = cfg.get(k)
        if v is None:
            continue
        tok = lambda t: t['content'] if isinstance(t, dict) else t
        out[k] = [tok(t) for t in v] if isinstance(v, list) else tok(v)
    return out


def model_template(d):
    cfg = json.load(open(os.path.join(d, 'tokenizer_config.json'), encoding='utf-8'))
    tpl = cfg.get('chat_template')
    if isinstance(tpl, list):
        tpl = {t['name']: t['template'] for t in tpl}.get('default')
    if tpl is None:
        tpl = open(os.path.join(d, 'chat_template.jinja'), encoding='utf-8').read()
    return tpl, special_tokens(cfg)


_compiled = {}


def render_chat(d, messages, gen, kwargs, date):
    """apply_chat_template(messages, tokenize=False, add_generation_prompt=gen, **kwargs)"""
    if (d, date) not in _compiled:
        tpl, special = model_template(d)
        _compiled[(d, date)] = (make_env(date).from_string(tpl), special)
    t, special = _compiled[(d, date)]
    # messages as cis2 reads them: content parts joined with "\n"
    msgs = []
    for m in messages:
        c = m['content']
        if isinstance(c, list):
            c = '\n'.join(p['text'] for p in c)
        msgs.append({'role': m['role'], 'content': c})
    return t.render(messages=msgs, tools=None, documents=None, add_generation_prompt=gen,
                    **{**special, **kwargs})


def chat(cases):
    for line in open(cases, encoding='utf-8'):
        d, mp, gen, kw, date = line.rstrip('\n').split('\t')
        msgs = json.load(open(mp, encoding='utf-8'))
        if isinstance(msgs, dict):
            msgs = msgs['messages']
        try:
            out = render_chat(d, msgs, gen == '1', json.loads(kw) if kw != '-' else {},
                              None if date == '-' else date)
            print(out.encode('utf-8').hex())
        except Exception as e:  # noqa: the reference fails where cis2 must
            print('ERR', type(e).__name__, str(e).replace('\n', ' ')[:200])


def cases(out_path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from jinja_cases import CASES
    with open(out_path, 'w', encoding='utf-8') as f:
        for c in CASES:
            name, tpl, vars_ = c[0], c[1], c[2]
            opts = c[3] if len(c) > 3 else {}
            rec = {'name': name, 'template': tpl, 'vars': vars_, 'date': opts.get('date')}
            try:
                rec['out'] = make_env(opts.get('date')).from_string(tpl).render(**vars_)
                if 'refused' in opts:
                    rec.pop('out')
                    rec['refused'] = opts['refused']
            except Exception as e:
                if 'refused' in opts:
                    rec['refused'] = opts['refused']
                else:
                    rec['error'] = type(e).__name__
            f.write(json.dumps(rec, ensure_ascii=False) + '\n')


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'cases':
        cases(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == 'chat':
        chat(sys.argv[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
