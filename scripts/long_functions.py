#!/usr/bin/env python3
"""Lists the non-test functions of `src/` longer than a limit (default 100 lines, from the
`fn` line to its closing brace; braces in comments and literals do not count). Test code
(`#[cfg(test)]` modules and functions, `tests.rs`, `roundtrip.rs`) and the `testing`
feature's scaffolding are left out.

usage: scripts/long_functions.py [LIMIT]    exit 1 when one is longer
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
TEST_FILES = {"tests.rs", "roundtrip.rs"}
# Test and bench scaffolding, compiled only with the `testing` feature.
SCAFFOLDING = {"testdata.rs", "fuzzing.rs", "bench.rs", "failpoint.rs"}
SCAFFOLDING_DIRS = {"testdata"}
FN = re.compile(r"^\s*(?:pub(?:\([a-z]+\))? )?(?:async )?(?:unsafe )?(?:const )?fn ([A-Za-z_0-9]+)")


def code_lines(text):
    """The lines of `text` with comments and the insides of string, raw-string, byte and
    char literals blanked out, so only the braces of code are left to count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            depth = 0
            while i < n:
                if text.startswith("/*", i):
                    depth += 1
                    i += 2
                elif text.startswith("*/", i):
                    depth -= 1
                    i += 2
                    if depth == 0:
                        break
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
            continue
        raw = re.match(r'b?r(#*)"', text[i:i + 300]) if c in "br" and not ident_before(text, i) else None
        if raw:
            close = '"' + raw.group(1)
            j = text.find(close, i + raw.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{7b}'); otherwise a lifetime or label.
            m = re.match(r"'(?:\\[^']*|[^'\\])'", text[i:i + 12])
            if m:
                out.append("''")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out).split("\n")


def ident_before(text, i):
    """Whether the character before `i` continues an identifier (so `r"` there is no raw string)."""
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def item_end(code, i):
    """The index of the line that ends the item starting at line `i`: the line of its closing
    brace, or of the `;` that ends it before any brace opens; None when it never ends."""
    depth = 0
    started = False
    for j in range(i, len(code)):
        depth += code[j].count("{") - code[j].count("}")
        if "{" in code[j]:
            started = True
        if started and depth <= 0:
            return j, True
        if not started and code[j].rstrip().endswith(";"):
            return j, False
    return None, started


def functions(path):
    """The (name, first line, length) of each function in the file at `path` outside
    `#[cfg(test)]` items."""
    lines = open(path).read().split("\n")
    code = code_lines("\n".join(lines))
    i = 0
    while i < len(lines):
        cfg_test = re.match(r"\s*#\[cfg\(test\)\]\s*", code[i])
        if cfg_test:
            # Skip the item that follows (a test module, function or `mod tests;`), which may
            # start on the attribute's own line.
            rest = code[i][cfg_test.end():]
            start = i if rest.strip() else i + 1
            saved = code[i]
            code[i] = rest
            end, _ = item_end(code, start)
            code[i] = saved
            i = len(lines) if end is None else end + 1
            continue
        m = FN.match(lines[i])
        if m:
            end, started = item_end(code, i)
            if started and end is not None:
                yield m.group(1), i + 1, end - i + 1
            i += 1
            continue
        i += 1


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    long = []
    for root, _, names in os.walk(SRC):
        if os.path.basename(root) in SCAFFOLDING_DIRS:
            continue
        for n in sorted(names):
            if n.endswith(".rs") and n not in TEST_FILES and n not in SCAFFOLDING:
                path = os.path.join(root, n)
                for name, line, length in functions(path):
                    if length > limit:
                        long.append((length, os.path.relpath(path, os.path.join(SRC, "..")), line, name))
    for length, path, line, name in sorted(long, reverse=True):
        print(f"{length:5} lines  {path}:{line}  {name}")
    if not long:
        print(f"no function over {limit} lines")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
