#!/usr/bin/env python3
"""Lists the import cycles between the top-level modules of `src/` (the modules of
`src/lib.rs`: `src/<m>.rs` or `src/<m>/`), from their `crate::<m>` paths, and the file
circles inside a module folder: sibling files that use each other in a loop, from their
`super::<file>` and `crate::<m>::<file>` paths (`mod.rs` owns its files: its paths to
them do not count, only its calls through `self`, below).
Test-only code (`#[cfg(test)]` modules, `tests.rs`, `roundtrip.rs`) and comments (doc
links) are left out: tests may look anywhere.

Calls through `self` count too, so the check sees what a reader sees: a method of a type
that file A calls as `self.name(` (or `Self::name`, `Type::name`) inside an `impl` of
that type, and that only file B defines (in its own `impl Type` or `impl Trait for Type`
block), makes A depend on B though no `use` line says so. Such an edge joins the file
graph of a folder, where `mod.rs` then counts as a file like its siblings (a sibling
calling up into a method of `mod.rs` goes back up), and the module graph when A and B
are in different modules. A method the calling file defines itself is taken to be the
one called (no edge). Reports name these edges by the methods called.

usage: scripts/module_cycles.py [--graph]    exit 1 when there is a cycle or a circle
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
TEST_FILES = {"tests.rs", "roundtrip.rs"}


def read(path):
    """A file's text."""
    with open(path) as f:
        return f.read()


def modules():
    """The modules `src/lib.rs` declares: its `mod x;` lines and the names listed in its
    `internal!(a, b, ...);` calls (the macro that declares each one as a module)."""
    lib = read(os.path.join(SRC, "lib.rs"))
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
            text = re.sub(r"//[^\n]*", "", strip_tests(read(f)))
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


def module_self_edges(edges, mods):
    """{(module a, module b): methods} for the calls through `self` from a file of `a`
    into a method only a file of `b` defines."""
    out = {}
    for (a, b), why in edges.items():
        ma, mb = module_of(a), module_of(b)
        if ma != mb and ma in mods and mb in mods:
            out.setdefault((ma, mb), set()).update(why)
    return out


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
    return re.sub(r"//[^\n]*", "", strip_tests(read(f)))


def file_graph(folder, mod_path, edges):
    """Edges between the sibling files of `folder` (module path `mod_path`, `a::b`):
    their paths to each other, and the calls through `self` in `edges` (the only edges
    `mod.rs` takes part in: its paths to its files are those of their owner)."""
    names = sorted(
        n[:-3] for n in os.listdir(folder)
        if n.endswith(".rs") and n not in TEST_FILES
    )
    rel = os.path.relpath(folder, SRC)
    g = {}
    for n in names:
        calls = [b for (a, b) in edges if a == os.path.join(rel, n + ".rs") and os.path.dirname(b) == rel]
        if n == "mod":
            g[n] = sorted(os.path.basename(b)[:-3] for b in calls)
            continue
        text = code(os.path.join(folder, n + ".rs"))
        refs = set(re.findall(r"super::([a-z_0-9]+)", text))
        refs |= set(re.findall(r"crate::" + re.escape(mod_path) + r"::([a-z_0-9]+)", text))
        for prefix in (r"super::\{", r"crate::" + re.escape(mod_path) + r"::\{"):
            for group in re.findall(prefix + r"([^}]*)\}", text):
                refs |= set(re.findall(r"(?:^|,)\s*([a-z_0-9]+)", group))
        refs |= {os.path.basename(b)[:-3] for b in calls}
        g[n] = sorted(r for r in refs if r in names and r != n)
    return g


def file_circles(edges):
    """(folder, circle, edges inside it, pairs inside it that go both ways) for every
    loop of sibling files under `src/`, counting the calls through `self` in `edges`.
    An edge is named by the methods called through `self`, after "path" when a path
    makes it too, so the reader knows what to move to undo it."""
    out = []
    for root, _, _ in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        if rel == "." or rel.split(os.sep)[0] == "bin":
            continue
        paths = file_graph(root, rel.replace(os.sep, "::"), {})
        g = file_graph(root, rel.replace(os.sep, "::"), edges)

        def named(n, d):
            why = edges.get((os.path.join(rel, n + ".rs"), os.path.join(rel, d + ".rs")))
            return labelled(d, why, d in paths[n])

        for c in cycles(g):
            out.append((rel, c, {n: [named(n, d) for d in g[n] if d in c] for n in c}, both_ways(g, c)))
    return out


def both_ways(g, c):
    """The pairs of a circle `c` of graph `g` that depend on each other directly."""
    return [f"{a} <-> {b}" for a in c for b in g[a] if b in c and a < b and a in g[b]]


def blank(text):
    """The text without comments and with the insides of string and char literals
    blanked (newlines kept, so offsets and lines stay), so that braces, `//` and
    paths inside literals count for nothing."""
    out, i, n = [], 0, len(text)
    while i < n:
        c, nxt = text[i], text[i + 1:i + 2]
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while depth and j < n:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "rb" and not re.match(r"\w", text[i - 1:i] or " ") and re.match(r'(?:br|r)#*"', text[i:]):
            m = re.match(r'(b?r)(#*)"', text[i:])
            close = '"' + m.group(2)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append(text[i:i + m.end()] + re.sub(r"[^\n]", " ", text[i + m.end():j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:j]) + '"')
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a, '_): only the
            # literal is blanked.
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", text[i:])
            if m:
                out.append("'" + " " * (m.end() - 2) + "'")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(text, i):
    """The index just past the `}` that closes the `{` at `i` (in blanked text)."""
    depth, j = 1, i + 1
    while depth and j < len(text):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return j


def drop_test_items(text):
    """Blanks every item marked `#[cfg(test)]` (a module, an impl, a function) in
    blanked text: the attribute, any further attributes, then the item up to its
    closing brace or its `;`."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        j = m.end()
        while True:
            a = re.compile(r"\s*#\[[^\]]*\]").match(text, j)
            if not a:
                break
            j = a.end()
        stop = re.compile(r"[{;]").search(text, j)
        end = len(text) if not stop else stop.end() if stop.group() == ";" else block_end(text, stop.start())
        out.append(text[i:m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]))
        i = end
    out.append(text[i:])
    return "".join(out)


def skip_angles(text, i):
    """The index just past the `<...>` that opens at `i` (`->` inside does not close)."""
    depth, j = 0, i
    while j < len(text):
        if text[j] == "<":
            depth += 1
        elif text[j] == ">" and text[j - 1] != "-":
            depth -= 1
            if not depth:
                return j + 1
        j += 1
    return j


def impl_blocks(text):
    """(type name, trait impl?, body) for every `impl` block of blanked code. The type is
    the last segment of the implementing type's path, without generics; None for a
    blanket impl over one of the block's own parameters (`impl<T: X> Y for T`)."""
    for m in re.finditer(r"^[ \t]*(?:unsafe\s+)?impl\b", text, re.M):
        brace = text.find("{", m.end())
        if brace < 0:
            return
        head = text[m.end():brace]
        params = ""
        if head.lstrip().startswith("<"):
            start = m.end() + head.index("<")
            params = text[start:skip_angles(text, start)]
            head = text[start + len(params):brace]
        head = re.split(r"\bwhere\b", head)[0]
        trait, ty = ([""] + re.split(r"\sfor\s", head))[-2:]
        ty = re.sub(r"^\s*(?:&\s*(?:'\w+\s*)?)?(?:mut\s+|dyn\s+)?", "", ty)
        name = re.match(r"[\w:]*", ty).group().split("::")[-1]
        if not name or re.search(r"\b" + name + r"\b", params):
            name = None
        yield name, bool(trait.strip()), text[brace + 1:block_end(text, brace) - 1]


def methods_defined(body):
    """The names of the functions an impl body defines itself (not ones nested in them)."""
    flat, depth = [], 0
    for c in body:
        depth += {"{": 1}.get(c, 0)
        flat.append(c if depth == 0 else " ")
        depth -= {"}": 1}.get(c, 0)
    return set(re.findall(r"\bfn\s+([a-z_][a-z_0-9]*)", "".join(flat)))


def methods_called(body, name):
    """(label, method) for what an impl body of type `name` calls through itself:
    `self.x(` (not `self.field.x(`, not a field `self.x`), and `Self::x` or `Name::x` (a
    call, or a function passed on)."""
    called = {("self." + x, x) for x in re.findall(
        r"(?<![\w.])self\s*\.\s*([a-z_][a-z_0-9]*)\s*(?:::\s*<[^(]*>\s*)?\(", body)}
    called |= {(t + "::" + x, x) for t, x in re.findall(
        r"(?<![\w:])(Self|" + re.escape(name) + r")\s*::\s*([a-z_][a-z_0-9]*)\b(?!\s*!)", body)}
    return called


def source_files():
    """Every non-test `.rs` file under `src/` but `src/bin/` (paths relative to `src/`)."""
    for root, _, names in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        if rel.split(os.sep)[0] == "bin":
            continue
        for n in sorted(names):
            if n.endswith(".rs") and n not in TEST_FILES:
                yield os.path.normpath(os.path.join(rel, n))


def type_home(name, f, homes):
    """The file declaring the type `name` that an impl in file `f` is for: the one
    declaration there is, else the one in `f`, else the one in `f`'s folder, else the one
    in `f`'s module; `f` itself when that stays open (no declaration: a foreign type, or
    several), so that two types of one name never pass for one."""
    found = homes.get(name, [])
    for near in (lambda h: True, lambda h: h == f,
                 lambda h: os.path.dirname(h) == os.path.dirname(f),
                 lambda h: h.split(os.sep)[0] == f.split(os.sep)[0]):
        pick = [h for h in found if near(h)]
        if len(pick) == 1:
            return pick[0]
    return f


def self_call_edges():
    """{(file A, file B): {"self.x", "Self::y", ...}}: A calls, through `self`, methods of
    a type that B defines and A does not. Inherent methods come before trait methods, as
    in Rust's method lookup."""
    codes = {f: drop_test_items(blank(read(os.path.join(SRC, f)))) for f in source_files()}
    homes = {}
    for f, text in codes.items():
        for name in re.findall(r"\b(?:struct|enum|union|trait|type)\s+([A-Z]\w*)", text):
            homes.setdefault(name, []).append(f)
    defs, calls = {}, []
    for f, text in codes.items():
        for name, trait, body in impl_blocks(text):
            if name is None:
                continue
            key = (name, type_home(name, f, homes))
            for method in methods_defined(body):
                defs.setdefault(key, {}).setdefault(method, {})
                defs[key][method][f] = defs[key][method].get(f, False) or not trait
            calls += [(f, key, label, method) for label, method in methods_called(body, name)]
    edges = {}
    for f, key, label, method in calls:
        definers = defs.get(key, {}).get(method, {})
        inherent = [d for d, own in definers.items() if own]
        targets = inherent or list(definers)
        if f in targets:
            continue
        # One definer, nearly always: a type cannot define one inherent method twice.
        # Several only for a trait method that impls of several traits in several files
        # name alike; the call is then taken to depend on each of those files.
        for d in targets:
            edges.setdefault((f, d), set()).add(label)
    return edges


def module_of(f):
    """The top-level module a file under `src/` belongs to."""
    return re.sub(r"\.rs$", "", f.split(os.sep)[0])


def labelled(dep, why, path=False):
    """`dep`, followed by the methods called through `self` when that is why (after
    "path;" when a path makes the edge too)."""
    if not why:
        return dep
    return f"{dep} ({'path; ' if path else ''}{', '.join(sorted(why))})"


def main():
    mods = modules()
    edges = self_call_edges()
    paths = graph(mods)
    over = module_self_edges(edges, mods)
    g = {m: sorted(set(deps) | {b for a, b in over if a == m}) for m, deps in paths.items()}

    def name(m, d):
        return labelled(d, over.get((m, d)), d in paths[m])

    if "--graph" in sys.argv:
        for m, deps in g.items():
            print(f"{m} -> {', '.join(name(m, d) for d in deps)}")
        for (a, b), why in sorted(edges.items()):
            print(f"calls through self: {a} -> {labelled(b, why)}")
    found = cycles(g)
    for c in found:
        inside = {m: [name(m, d) for d in g[m] if d in c] for m in c}
        print(f"cycle of {len(c)} modules: " + "; ".join(f"{m} -> {', '.join(d)}" for m, d in inside.items()))
        if both_ways(g, c):
            print("  both ways: " + ", ".join(both_ways(g, c)))
    if not found:
        print(f"no import cycle among {len(g)} modules")
    circles = file_circles(edges)
    for folder, c, inside, pairs in circles:
        print(f"file circle in src/{folder}: " + "; ".join(f"{n} -> {', '.join(d)}" for n, d in inside.items()))
        if pairs:
            print(f"  both ways in src/{folder}: " + ", ".join(pairs))
    if not circles:
        print("no file circle")
    return 1 if found or circles else 0


if __name__ == "__main__":
    sys.exit(main())
