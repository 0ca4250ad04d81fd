#!/usr/bin/env python3
"""The library's edge, read from the objects with nm (tests/t_layers.sh runs it).

edge_check.py --flags SOURCE...
  prints "flag FILE:LINE: LITERAL" for every C string literal (comments dropped) that
  names a command-line flag (--word): library messages use the library's terms.

edge_check.py SO LISTS [EXTRA_CLI_OBJ...]
  SO     the shared library (its dynamic symbols are the exported API)
  LISTS  `make print-edge` output: lines "LIB objs", "TOOL objs", "CLI objs"
  EXTRA_CLI_OBJ  objects added to the CLI's (the negative control)

Prints one line per finding, prefixed by the check's name:
  cli-internal OBJ SYM   a CLI object takes SYM from libcis2, which does not export it
                         and libcis2_tool.a does not define it
  whitebox OBJ SYM       the same, in a white-box object (WHITEBOX below); listed, not a fault
  unreachable OBJ        a libcis2 object no exported function reaches
  shared-not-leaf OBJ SYM  a TOOL_SHARED object (in both libraries) needs an internal of
                         the library that the tool library does not hold
and a last line "counts USED INTERNAL WHITEBOX LIB_OBJS UNREACHABLE": the distinct
library symbols the CLI's objects take, those neither exported nor the tool library's,
those of them only white-box objects take, libcis2's objects, the unreachable ones."""
import re, subprocess, sys

# `cis2 bench` times the engine's parts (the loader's timings, one backend's attention at
# position P, the kernels' peak): white-box by purpose, listed by name (docs/architecture.md).
WHITEBOX = {"cli/cmd_bench.o", "cli/bench_peak.o"}


def syms_all(objs):
    """{obj: (defined, undefined)} for every object, from one `nm -A` over all of them."""
    res = {o: (set(), set()) for o in objs}
    if not objs:
        return res
    out = subprocess.run(["nm", "-A"] + list(objs), capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        obj, _, rest = line.partition(":")
        p = rest.split()
        if obj not in res:
            continue
        if len(p) == 2 and p[0] == "U":
            res[obj][1].add(p[1])
        elif len(p) == 3 and p[1] in "TDBRVWCGS":
            res[obj][0].add(p[2])
    return res


def flags(files):
    lit = re.compile(r'"(?:[^"\\\n]|\\.)*"')
    flag = re.compile(r"(^|[^A-Za-z0-9-])--[a-z]")
    for f in files:
        t = open(f, encoding="utf-8").read()
        t = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), t, flags=re.S)
        for i, line in enumerate(t.split("\n")):
            line = re.sub(r"//.*", "", line)
            for s in lit.findall(line):
                if flag.search(s):
                    print("flag %s:%d: %s" % (f, i + 1, s))


def main():
    if sys.argv[1] == "--flags":
        flags(sys.argv[2:])
        return
    so, lists = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    L = {}
    for line in open(lists):
        k, _, v = line.partition(" ")
        L[k] = v.split()
    exported = set()
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3:
            exported.add(p[2])
    clis = [o for o in L["CLI"] + extra if not o.endswith("serve_assets.o")]
    every = syms_all(sorted(set(L["LIB"] + L["TOOL"] + clis)))
    lib = {o: every[o] for o in L["LIB"]}
    tool = {o: every[o] for o in L["TOOL"]}
    cli = {o: every[o] for o in clis}
    lib_def = set().union(*(d for d, _ in lib.values()))
    tool_def = set().union(*(d for d, _ in tool.values()))
    key = lambda o: "/".join(o.split("/")[-2:])
    uses, internal, white = set(), set(), set()
    for o, (_, und) in sorted(cli.items()):
        for s in sorted(und & lib_def):
            uses.add(s)
            if s in exported or s in tool_def:
                continue
            if key(o) in WHITEBOX:
                white.add(s)
                print("whitebox", key(o), s)
            else:
                internal.add(s)
                print("cli-internal", key(o), s)
    # reachability inside libcis2 from the exported functions
    who = {}
    for o, (d, _) in lib.items():
        for s in d:
            who.setdefault(s, o)
    seen = {o for o, (d, _) in lib.items() if d & exported}
    todo = list(seen)
    while todo:
        o = todo.pop()
        for s in lib[o][1]:
            w = who.get(s)
            if w and w not in seen:
                seen.add(w)
                todo.append(w)
    # an object that defines nothing (another ISA's kernels, compiled out here) holds no code
    unreach = sorted(key(o) for o in lib if o not in seen and lib[o][0])
    for o in unreach:
        print("unreachable", o)
    # a shared helper needs nothing of the library beyond the tool library's own objects
    lib_keys = {key(o) for o in lib}
    for o, (_, und) in sorted(tool.items()):
        if key(o) in lib_keys:
            for s in sorted((und & lib_def) - tool_def - exported):
                print("shared-not-leaf", key(o), s)
    print("counts", len(uses), len(internal), len(white - internal), len(lib), len(unreach))


main()
