#!/usr/bin/env python3
"""Lists the import cycles between the top-level modules of `src/` (the modules of
`src/lib.rs`: `src/<m>.rs` or `src/<m>/`), from their `crate::<m>` paths, and the file
circles inside a module folder: sibling files (not `mod.rs`, which owns them) that use
each other in a loop, from their `super::<file>` and `crate::<m>::<file>` paths.
Test-only code (`#[cfg(test)]` modules, `tests.rs`, `roundtrip.rs`) and comments (doc
links) are left out: tests may look anywhere.

usage: scripts/module_cycles.py [--graph]    exit 1 when there is a cycle or a circle
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
TEST_FILES = {"tests.rs", "roundtrip.rs"}


def modules():
    """The modules `src/lib.rs` declares: its `mod x;` lines and the names listed in its
    `internal!(a, b, ...);` calls (the macro that declares each one as a module)."""
    lib = open(os.path.join(SRC, "lib.rs")).read()
    mods = set(re.findall(r"^\s*(?:pub(?:\([a-z]+\))? )?mod ([a-z_0-9]+);", lib, re.M))
    for group in re.findall(r"^\s*internal!\s*\(([^)]*)\)\s*;", lib, re.M):
        mods |= set(re.findall(r"[a-z_0-9]+", group))
    return sorted(mods)


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


def code(f):
    """A file's code: no tests, no comments (doc links are not dependencies)."""
    return re.sub(r"//[^\n]*", "", strip_tests(open(f).read()))


def file_graph(folder, mod_path):
    """Edges between the sibling files of `folder` (module path `mod_path`, `a::b`)."""
    names = sorted(
        n[:-3] for n in os.listdir(folder)
        if n.endswith(".rs") and n != "mod.rs" and n not in TEST_FILES
    )
    g = {}
    for n in names:
        text = code(os.path.join(folder, n + ".rs"))
        refs = set(re.findall(r"super::([a-z_0-9]+)", text))
        refs |= set(re.findall(r"crate::" + re.escape(mod_path) + r"::([a-z_0-9]+)", text))
        for prefix in (r"super::\{", r"crate::" + re.escape(mod_path) + r"::\{"):
            for group in re.findall(prefix + r"([^}]*)\}", text):
                refs |= set(re.findall(r"(?:^|,)\s*([a-z_0-9]+)", group))
        g[n] = sorted(r for r in refs if r in names and r != n)
    return g


def file_circles():
    """(folder, circle) for every loop of sibling files under `src/`."""
    out = []
    for root, _, _ in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        if rel == "." or rel.split(os.sep)[0] == "bin":
            continue
        g = file_graph(root, rel.replace(os.sep, "::"))
        for c in cycles(g):
            out.append((rel, c, {n: [d for d in g[n] if d in c] for n in c}))
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
    circles = file_circles()
    for folder, c, inside in circles:
        print(f"file circle in src/{folder}: " + "; ".join(f"{n} -> {', '.join(d)}" for n, d in inside.items()))
    if not circles:
        print("no file circle")
    return 1 if found or circles else 0


if __name__ == "__main__":
    sys.exit(main())
