#!/usr/bin/env python3
"""Holds the shape of `src/` to the limits a reader can follow (test code and the `testing`
feature's scaffolding left out, as in `scripts/long_functions.py`):

- no function longer than 60 lines;
- no function that takes more than 6 values (`self` counted), no parameter that is a tuple,
  and no tuple with a `bool` in it anywhere in a signature;
- `Ingest` has at most 20 methods;
- no file over 1,000 lines of non-test code;
- README.md at most 400 lines;
- DESIGN.md names every source file of `src/` (by its path under `src/`), and every
  `src/...` path it names exists.

usage: scripts/code_shape.py [--counts]    exit 1 when a limit is broken; --counts prints
the measures even when all hold
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from long_functions import SRC, TEST_FILES, SCAFFOLDING, SCAFFOLDING_DIRS, code_lines, functions  # noqa: E402

ROOT = os.path.normpath(os.path.join(SRC, ".."))
MAX_FN_LINES = 60
MAX_VALUES = 6
MAX_INGEST_METHODS = 20
MAX_FILE_LINES = 1000
MAX_README_LINES = 400
FN = re.compile(r"\bfn\s+([A-Za-z_0-9]+)\s*(<)?")


def sources(include_tests=False):
    for root, dirs, names in os.walk(SRC):
        dirs.sort()
        if not include_tests and os.path.basename(root) in SCAFFOLDING_DIRS:
            continue
        for n in sorted(names):
            if not n.endswith(".rs"):
                continue
            if not include_tests and (n in TEST_FILES or n in SCAFFOLDING):
                continue
            yield os.path.join(root, n)


def without_tests(code):
    """`code` (lines from `code_lines`) with `#[cfg(test)]` items blanked."""
    code = list(code)
    i = 0
    while i < len(code):
        m = re.match(r"\s*#\[cfg\(test\)\]\s*", code[i])
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        first = code[i][m.end():]
        code[i] = ""
        while j < len(code):
            line = first if j == i else code[j]
            depth += line.count("{") - line.count("}")
            started = started or "{" in line
            code[j] = ""
            if (started and depth <= 0) or (not started and line.rstrip().endswith(";")):
                break
            j += 1
        i = j + 1
    return code


def skip_generics(text, i):
    """The index after the `<...>` that starts at `i`."""
    depth = 0
    while i < len(text):
        if text.startswith("->", i):
            i += 2
            continue
        c = text[i]
        depth += {"<": 1, ">": -1}.get(c, 0)
        i += 1
        if depth == 0:
            return i
    return i


def split_top(text):
    """`text` split at the commas outside any brackets."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(text):
        if text.startswith("->", i):
            cur.append("->")
            i += 2
            continue
        c = text[i]
        if c in "([<{":
            depth += 1
        elif c in ")]>}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def signatures(path):
    """(name, line, params, return type text) of each function outside test code."""
    text = "\n".join(without_tests(code_lines(open(path).read())))
    for m in FN.finditer(text):
        i = m.end() - (1 if m.group(2) else 0)
        if m.group(2):
            i = skip_generics(text, i)
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] != "(":
            continue
        depth, j = 0, i
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        params = split_top(text[i + 1:j - 1])
        end = min([k for k in (text.find("{", j), text.find(";", j)) if k >= 0] or [len(text)])
        yield m.group(1), text.count("\n", 0, m.start()) + 1, params, text[j:end]


def tuple_has_bool(t):
    """Whether a tuple type in `t` holds a `bool` at its top level."""
    for m in re.finditer(r"\(", t):
        depth, j = 0, m.start()
        while j < len(t):
            depth += {"(": 1, ")": -1}.get(t[j], 0)
            j += 1
            if depth == 0:
                break
        inner = t[m.start() + 1:j - 1]
        parts = split_top(inner)
        if len(parts) > 1 and "bool" in parts:
            return True
    return False


def rel(path):
    return os.path.relpath(path, ROOT)


def main():
    problems, counts = [], {}
    long = [(rel(p), line, name, n) for p in sources() for name, line, n in functions(p) if n > MAX_FN_LINES]
    counts["functions over %d lines" % MAX_FN_LINES] = len(long)
    problems += [f"{p}:{line}  {name} is {n} lines" for p, line, name, n in long]

    many, tuples, bools = [], [], []
    ingest_methods = []
    for p in sources():
        for name, line, params, ret in signatures(p):
            where = f"{rel(p)}:{line}  {name}"
            if len(params) > MAX_VALUES:
                many.append(f"{where} takes {len(params)} values")
            for q in params:
                ty = q.split(":", 1)[1].strip() if ":" in q else ""
                pat = q.split(":", 1)[0].strip()
                # `&(dyn Fn() + Sync)` is a type in parentheses, not a tuple.
                parenthesized = re.match(r"&?(mut )?\((dyn|impl) ", ty)
                if pat.startswith("(") or (re.match(r"&?(mut )?\(", ty) and not parenthesized):
                    tuples.append(f"{where} takes a tuple: {' '.join(q.split())}")
            if any(tuple_has_bool(x) for x in params + [ret]):
                bools.append(f"{where} has a bool in a tuple")
    counts["functions over %d values" % MAX_VALUES] = len(many)
    counts["tuple parameters"] = len(tuples)
    counts["signatures with a bool in a tuple"] = len(bools)
    problems += many + tuples + bools

    for p in sources():
        code = without_tests(code_lines(open(p).read()))
        for m in re.finditer(r"^impl(?:<[^>]*>)?\s+Ingest\b[^{]*\{", "\n".join(code), re.M):
            block = "\n".join(code)[m.end():]
            depth, k = 1, 0
            while k < len(block) and depth:
                depth += {"{": 1, "}": -1}.get(block[k], 0)
                k += 1
            body = block[:k]
            # Methods at the block's own depth.
            d = 0
            for line in body.split("\n"):
                if d == 0 and re.search(r"\bfn\s+[a-z_0-9]+", line):
                    fname = re.search(r"fn\s+([a-z_0-9]+)", line).group(1)
                    ingest_methods.append(f"{rel(p)}  {fname}")
                d += line.count("{") - line.count("}")
    counts["Ingest methods"] = len(ingest_methods)
    if len(ingest_methods) > MAX_INGEST_METHODS:
        problems.append(f"Ingest has {len(ingest_methods)} methods (at most {MAX_INGEST_METHODS}): "
                        + ", ".join(m.split()[-1] for m in ingest_methods))

    big = []
    for p in sources():
        n = sum(1 for line in without_tests(code_lines(open(p).read())))
        # Count lines up to the last non-blank code line.
        code = without_tests(code_lines(open(p).read()))
        while code and not code[-1].strip():
            code.pop()
        n = len(code)
        if n > MAX_FILE_LINES:
            big.append(f"{rel(p)} has {n} lines of non-test code")
    counts["files over %d lines of non-test code" % MAX_FILE_LINES] = len(big)
    problems += big

    readme = open(os.path.join(ROOT, "README.md")).read().count("\n")
    counts["README.md lines"] = readme
    if readme > MAX_README_LINES:
        problems.append(f"README.md has {readme} lines (at most {MAX_README_LINES}): move reference parts to docs/")

    design = open(os.path.join(ROOT, "DESIGN.md")).read()
    unnamed = [rel(p) for p in sources(include_tests=True)
               if os.path.relpath(p, SRC) not in design and rel(p) not in design]
    counts["source files DESIGN.md does not name"] = len(unnamed)
    problems += [f"DESIGN.md does not name {u}" for u in unnamed]
    gone = sorted({m for m in re.findall(r"`(src/[A-Za-z0-9_/]+(?:\.rs|/))`", design)
                   if not os.path.exists(os.path.join(ROOT, m))})
    counts["paths DESIGN.md names that do not exist"] = len(gone)
    problems += [f"DESIGN.md names {g}, which does not exist" for g in gone]

    if "--counts" in sys.argv or problems:
        for k, v in counts.items():
            print(f"{v:6}  {k}")
    for pr in problems:
        print(pr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
