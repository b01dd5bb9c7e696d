#!/usr/bin/env python3
"""Lists the import cycles between the top-level modules of `src/` (the modules of
`src/lib.rs`: `src/<m>.rs` or `src/<m>/`), from their `crate::<m>` paths. Test-only code
(`#[cfg(test)]` modules, `tests.rs`, `roundtrip.rs`) and comments (doc links) are left
out: tests may look anywhere.

usage: scripts/module_cycles.py [--graph]    exit 1 when there is a cycle
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
TEST_FILES = {"tests.rs", "roundtrip.rs"}


def modules():
    lib = open(os.path.join(SRC, "lib.rs")).read()
    return sorted(set(re.findall(r"^\s*(?:pub(?:\([a-z]+\))? )?mod ([a-z_0-9]+);", lib, re.M)))


def strip_tests(text):
    """Drops `#[cfg(test)] mod x { ... }` blocks (brace matched)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod [a-z_0-9]+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def files_of(m):
    single = os.path.join(SRC, m + ".rs")
    if os.path.exists(single):
        yield single
    folder = os.path.join(SRC, m)
    if os.path.isdir(folder):
        for root, _, names in os.walk(folder):
            for n in names:
                if n.endswith(".rs") and n not in TEST_FILES:
                    yield os.path.join(root, n)


def graph(mods):
    g = {}
    for m in mods:
        deps = set()
        for f in files_of(m):
            # Code only: doc links and comments are not dependencies.
            text = re.sub(r"//[^\n]*", "", strip_tests(open(f).read()))
            for d in re.findall(r"crate::([a-z_0-9]+)", text):
                if d in mods and d != m:
                    deps.add(d)
            # `use crate::{a, b::c}` groups.
            for group in re.findall(r"crate::\{([^}]*)\}", text):
                for d in re.findall(r"(?:^|,)\s*([a-z_0-9]+)", group):
                    if d in mods and d != m:
                        deps.add(d)
        g[m] = sorted(deps)
    return g


def cycles(g):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in g:
        if v not in index:
            visit(v)
    return out


def main():
    g = graph(modules())
    if "--graph" in sys.argv:
        for m, deps in g.items():
            print(f"{m} -> {', '.join(deps)}")
    found = cycles(g)
    for c in found:
        inside = {m: [d for d in g[m] if d in c] for m in c}
        print(f"cycle of {len(c)} modules: " + "; ".join(f"{m} -> {', '.join(d)}" for m, d in inside.items()))
    if not found:
        print(f"no import cycle among {len(g)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
