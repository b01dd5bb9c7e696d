#!/usr/bin/env python3
"""Independent oracle for the batch-identity tests: counts what a load of landing folders
must produce, computed from the files with Python's json module alone (no bronze code).

usage: batch_counts.py FOLDER... (folders in the order their files are read)

Prints JSON: per table, the rows a load of all the folders as ONE batch must hold
(a message id seen before in any earlier folder, file or line is a duplicate), plus
`_corrupt`, `_duplicates` and `_lines`. Child tables: `currentprice` (one row per element
of a payload's `currentprice` array) and `tags` (one per element of `tags`).
A line is a message iff it is a JSON object with a string `topic` and a `message_id`.
"""
import json
import os
import sys
from collections import Counter


def main(folders):
    counts = Counter()
    seen = set()
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".jsonl") or name.startswith((".", "_")):
                continue
            with open(os.path.join(folder, name), "rb") as f:
                for raw in f.read().split(b"\n"):
                    if not raw.strip():
                        continue
                    counts["_lines"] += 1
                    try:
                        msg = json.loads(raw)
                    except ValueError:
                        counts["_corrupt"] += 1
                        continue
                    if not isinstance(msg, dict) or not isinstance(msg.get("topic"), str) \
                            or "message_id" not in msg:
                        counts["_corrupt"] += 1
                        continue
                    key = json.dumps(msg["message_id"])
                    if key in seen:
                        counts["_duplicates"] += 1
                        continue
                    seen.add(key)
                    counts[msg["topic"]] += 1
                    payload = msg.get("payload") or {}
                    for child in ("currentprice", "tags"):
                        if isinstance(payload.get(child), list):
                            counts[child] += len(payload[child])
    json.dump(dict(counts), sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
