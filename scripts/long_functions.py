#!/usr/bin/env python3
"""Lists the non-test functions of `src/` longer than a limit (default 100 lines, from the
`fn` line to its closing brace). Test code (`#[cfg(test)]` modules, `tests.rs`,
`roundtrip.rs`) and the `testing` feature's scaffolding are left out.

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


def functions(path):
    lines = open(path).read().split("\n")
    skip_until = -1
    depth = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            # Skip the item that follows (a test module or function).
            j = i + 1
            d = 0
            started = False
            while j < len(lines):
                d += lines[j].count("{") - lines[j].count("}")
                if "{" in lines[j]:
                    started = True
                if started and d <= 0:
                    break
                j += 1
            i = j + 1
            continue
        m = FN.match(line)
        if m:
            j = i
            d = 0
            started = False
            while j < len(lines):
                code = re.sub(r"//.*", "", lines[j])
                code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)
                code = re.sub(r"b?'(?:\\.|[^'\\])'", "''", code)
                d += code.count("{") - code.count("}")
                if "{" in code:
                    started = True
                if started and d <= 0:
                    break
                if not started and code.rstrip().endswith(";"):
                    break
                j += 1
            if started:
                yield m.group(1), i + 1, j - i + 1
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
