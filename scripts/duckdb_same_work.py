#!/usr/bin/env python3
"""Bronze's work for one batch folder, done with DuckDB (issue 38's "same work" peer).

    .venv/bin/python scripts/duckdb_same_work.py BATCH_DIR OUT_DIR [--threads 2] [--delta]

What it does, in DuckDB SQL driven by a little Python (the SQL is generated from the
structure DuckDB infers per topic):

1. reads every `*.jsonl` / `*.json` file of BATCH_DIR (sorted; hidden and `_` names
   skipped) with `read_text`, splits it into lines (`string_split` +
   `generate_subscripts`: the 1-based line number in its file), drops blank lines;
2. keeps, per line, whether it is valid JSON (`json_valid`), an object and an envelope
   (a `topic` and a `message_id`); every other non-blank line goes to
   `_corrupt_records` with its file, line, reason, text and bytes;
3. drops duplicate message ids: the first occurrence by (file, line) wins, as in bronze;
4. infers each topic's envelope structure (`json_structure` per line, the distinct
   structures merged per topic as `json_group_structure` merges them), parses the
   topic's lines once (`from_json`) into a table, and writes:
   - the topic table: nested objects flattened to `a__b` columns, the envelope's other
     fields as `_meta__<field>`, empty arrays kept as `[]` in the parent's column;
   - one child table per array path, shared by every topic with that path (`currentprice`,
     `levels__orders` for an array inside an array's elements, recursively): rows of the
     elements' flattened fields, or one `value` column for arrays of scalars (JSON text
     for mixed arrays and arrays of arrays), keyed by `_id` (md5 of root id, table, array
     path, parent id and index: deterministic), `_parent_id`, `_root_id`, `_idx`;
   - `_corrupt_records`;
   every row stamped with `_batch_id`, `_landing_path`, `_topic`, `_source_file`, `_line`,
   `_loaded_at` (the names and meaning of bronze's lineage columns);
5. writes one Parquet file per table, `OUT_DIR/<table>.parquet` (a shared child table is
   one file: its topics' rows `UNION ALL BY NAME`), and with `--delta` also a Delta table
   per table under `OUT_DIR/_delta/<table>` (`deltalake.write_deltalake`, overwrite).

Types are DuckDB's inference: booleans, BIGINT, DOUBLE, VARCHAR, and JSON text for mixed
or empty-object values, as bronze's `--types infer` (a column of nulls only: a string).
Names are sanitised like bronze's (`[a-z0-9_]`, `_2` on a collision or a system name,
`t_` before a topic starting with `_`, `c_` for the child table of an array payload). The
parent's column of an array (`[]` when empty, else null) exists only when the batch has
an empty one, as in bronze. Independent statements (a topic's parse, a table's write)
run `--threads` at a time, each on its own cursor, on DuckDB's `--threads` threads.

Known differences from bronze, by design of a short script: no `_run_control`, no
replace of an earlier load (OUT_DIR is rewritten), no `_rescued_data` (types are the
batch's own, so nothing needs rescuing; a repeated key is DuckDB's to resolve); DuckDB's
JSON reader is more lenient than RFC 8259 (a trailing comma or `NaN` is accepted) and its
corrupt-line reasons name no byte offset; struct keys differing only by case collide in
DuckDB; a path that is an array in some messages and an object or scalar in others is
kept as JSON text instead of being split; numbers an int64 or a double would not hold
exactly are not kept as JSON text (an integer beyond 2^64 or with a fraction becomes a
DOUBLE, one between 2^63 and 2^64 a null); `.jsonl.gz` files are not
read, and a file must be valid UTF-8; `_id` is md5, not bronze's positional id
(`<message id>/<path>/<index>`), so the ids are deterministic but not bronze's.

Prints one line: wall seconds, lines, messages, corrupt lines, duplicates, tables.
Exit code 1 when corrupt lines were kept (like bronze), else 0.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import duckdb

LINEAGE = ["_batch_id", "_landing_path", "_topic", "_source_file", "_line", "_loaded_at"]
TOPIC_SYSTEM = {"_id", "_rescued_data", *LINEAGE}
CHILD_SYSTEM = TOPIC_SYSTEM | {"_parent_id", "_root_id", "_idx"}
ENVELOPE = {"topic", "message_id", "payload"}
SCALARS = {"VARCHAR", "BIGINT", "DOUBLE", "BOOLEAN", "JSON"}


def sanitize(name: str) -> str:
    """Bronze's name rule: lower case, `[a-z0-9_]`, at most 128 bytes."""
    out = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if len(out) > 128:
        out = out[:119] + "_" + hashlib.md5(name.encode()).hexdigest()[:8]
    return out


def unique(name: str, taken: set) -> str:
    if name not in taken:
        taken.add(name)
        return name
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    taken.add(f"{name}_{n}")
    return f"{name}_{n}"


def q(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def normalize(s):
    """DuckDB's inferred structure → the structure given to `from_json`."""
    if isinstance(s, dict):
        if not s:
            return "JSON"  # an empty object: kept as its JSON text `{}`
        return {k: normalize(v) for k, v in s.items()}
    if isinstance(s, list):
        return [normalize(s[0])]
    if s in ("UBIGINT", "INTEGER", "UINTEGER", "SMALLINT", "TINYINT"):
        return "BIGINT"  # json_structure says UBIGINT for any non-negative integer
    if s == "NULL":
        return "VARCHAR"  # only nulls: bronze makes such a column a string
    if s in SCALARS:
        return s
    return "JSON"  # HUGEINT and anything else: keep the JSON text


NUMBERS = {"UBIGINT": 0, "BIGINT": 1, "DOUBLE": 2}


def merge(a, b):
    """Two `json_structure` results merged as `json_group_structure` merges them."""
    if a == b:
        return a
    if a == "NULL":
        return b
    if b == "NULL":
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if k in out else v
        return out
    if isinstance(a, list) and isinstance(b, list):
        return [merge(a[0], b[0])]
    if a in NUMBERS and b in NUMBERS:
        return max(a, b, key=NUMBERS.get)
    return "JSON"


def leaf_expr(expr: str, s) -> str:
    if s == "JSON":
        return f"CAST({expr} AS VARCHAR)"
    return expr


class Optional:
    """A column kept only when its condition held on some row (bronze adds the column of
    an array to the parent only when the batch has an empty one: `[]`)."""

    def __init__(self, exists: str, sql: str):
        self.exists, self.sql, self.keep = exists, sql, False


class Part:
    """One SELECT: fixed head columns, flattened columns (some Optional), a FROM."""

    def __init__(self, head, cols, source):
        self.head, self.cols, self.source = head, cols, source

    def optionals(self):
        return [c for c in self.cols if isinstance(c, Optional)]

    def sql(self) -> str:
        cols = [c if isinstance(c, str) else c.sql for c in self.cols if isinstance(c, str) or c.keep]
        return f"SELECT {', '.join(self.head + cols)} FROM {self.source}"


class Plan:
    """The SELECTs of one batch: per topic table, per child table (a list over topics)."""

    def __init__(self):
        self.topics = {}  # table name -> Part
        self.children = {}  # table name -> [Part, ...] (one per topic with that array)
        self.by_topic = {}  # topic -> [Part, ...] (its own table and its child parts)
        self.child_names = {}  # array path (sanitised parts) -> table name
        self.table_names = set()

    def child_table(self, parts) -> str:
        key = tuple(parts)
        if key not in self.child_names:
            base = "__".join(parts)
            if not base or base.startswith("_"):  # an array payload: path "" -> `c_`
                base = "c_" + base
            self.child_names[key] = unique(base, self.table_names)
        return self.child_names[key]


def flatten(expr, s, prefix, cols, taken, arrays, name_parts, pointer, wrap):
    """Columns for struct expression `expr` of structure `s`; arrays collected apart.

    `wrap` lifts a condition on one element to one on the topic's row (through the
    arrays the element is in), for the Optional columns."""
    if isinstance(s, dict):
        for key, sub in s.items():
            flatten(
                f"{expr}.{q(key)}",
                sub,
                prefix + [sanitize(key)],
                cols,
                taken,
                arrays,
                name_parts + [sanitize(key)],
                pointer + "/" + key.replace("~", "~0").replace("/", "~1"),
                wrap,
            )
    elif isinstance(s, list):
        arrays.append((expr, s[0], name_parts, pointer))
        # an empty array stays in the parent's column as `[]`, as bronze keeps it
        name = unique("__".join(prefix) or "value", taken)
        cols.append(Optional(wrap(f"len({expr}) = 0"), f"CASE WHEN len({expr}) = 0 THEN '[]' END AS {q(name)}"))
    else:
        name = unique("__".join(prefix) or "value", taken)
        cols.append(f"{leaf_expr(expr, s)} AS {q(name)}")


def child_sql(plan, topic, source, list_expr, elem, name_parts, pointer, lineage_cols, depth, wrap):
    """Rows of one array (and, recursively, of the arrays inside its elements).

    `source` is a relation with `_id`, `_root_id`, lineage and the columns `list_expr`
    refers to; the elements are `e<depth>`. Each step projects only the array it
    unnests: carrying a topic's whole struct through the subqueries made planning cost
    more than running them."""
    table = plan.child_table(name_parts)
    e = f"e{depth}"
    unnested = (
        f"SELECT {lineage_cols}, _root_id, _id AS _parent_id, "
        f"unnest(a) AS {e}, generate_subscripts(a, 1) - 1 AS _idx "
        f"FROM (SELECT _id, _root_id, {lineage_cols}, {list_expr} AS a FROM {source})"
    )
    keyed = (
        f"SELECT md5(concat_ws(chr(31), _root_id, {lit(table)}, {lit(pointer)}, "
        f"_parent_id, _idx::VARCHAR)) AS _id, _parent_id, _root_id, _idx, "
        f"{lineage_cols}, {e} FROM ({unnested})"
    )

    def inner(cond):
        return wrap(f"list_bool_or(list_transform({list_expr}, lambda {e}: {cond}))")

    cols, arrays = [], []
    taken = set(CHILD_SYSTEM)
    if isinstance(elem, dict):
        flatten(e, elem, [], cols, taken, arrays, name_parts, pointer + "/*", inner)
    elif isinstance(elem, list):
        cols.append(f"CAST(to_json({e}) AS VARCHAR) AS value")  # arrays of arrays: JSON text
    else:
        cols.append(f"{leaf_expr(e, elem)} AS value")
    part = Part(["_id", "_parent_id", "_root_id", "_idx", lineage_cols], cols, f"({keyed})")
    plan.children.setdefault(table, []).append(part)
    plan.by_topic[topic].append(part)
    for expr, sub_elem, parts, sub_ptr in arrays:
        child_sql(plan, topic, f"({keyed})", expr, sub_elem, parts, sub_ptr, lineage_cols, depth + 1, inner)


def plan_topic(plan, topic, parsed, structure):
    lineage_cols = ", ".join(LINEAGE)
    meta = {k: v for k, v in structure.items() if k not in ENVELOPE}
    payload = structure.get("payload")
    cols, arrays = [], []
    taken = set(TOPIC_SYSTEM)

    def top(cond):
        return cond

    for key, sub in meta.items():
        flatten(f"j.{q(key)}", sub, ["_meta", sanitize(key)], cols, taken, [], [], "", top)
    if payload is not None:
        if isinstance(payload, dict):
            flatten("j.payload", payload, [], cols, taken, arrays, [], "", top)
        elif isinstance(payload, list):
            arrays.append(("j.payload", payload[0], [], ""))
        else:
            cols.append(f"{leaf_expr('j.payload', payload)} AS value")
    name = sanitize(topic)
    if not name or name.startswith("_"):
        name = "t_" + name
    name = unique(name, plan.table_names)
    part = Part(["_id", lineage_cols], cols, parsed)
    plan.topics[name] = part
    plan.by_topic[topic] = [part]
    source = f"(SELECT *, _id AS _root_id FROM {parsed})"
    for expr, elem, parts, pointer in arrays:
        child_sql(plan, topic, source, expr, elem, parts, pointer, lineage_cols, 1, top)


def find_optionals(cur, plan, topic, parsed):
    """One pass over a topic's parsed rows: which Optional columns have a value."""
    opts = [o for part in plan.by_topic[topic] for o in part.optionals()]
    if not opts:
        return
    row = cur.execute(
        f"SELECT {', '.join(f'coalesce(bool_or({o.exists}), false)' for o in opts)} FROM {parsed}"
    ).fetchone()
    for o, keep in zip(opts, row):
        o.keep = keep


def batch_key(batch: str):
    folder = os.path.basename(os.path.normpath(batch))
    batch_id = folder.split("=", 1)[1] if folder.startswith("batch_id=") else folder
    parent = os.path.dirname(os.path.abspath(os.path.normpath(batch)))
    landing = "/".join(parent.split(os.sep)[-2:])
    return batch_id, landing


def data_files(batch: str):
    names = sorted(
        n
        for n in os.listdir(batch)
        if not n.startswith((".", "_"))
        and n.endswith((".jsonl", ".json"))
        and n != "manifest.json"
        and os.path.isfile(os.path.join(batch, n))
        and not os.path.islink(os.path.join(batch, n))
    )
    return [os.path.join(os.path.abspath(batch), n) for n in names]  # bronze: absolute paths


def stage(con, files, batch_id, landing, loaded_at, sort):
    file_list = "[" + ", ".join(lit(f) for f in files) + "]"
    # Lines numbered in their file; one parse to validate, one to read topic and id.
    con.execute(
        f"""
        CREATE TABLE checked AS
        WITH split AS (
            SELECT filename, string_split(content, chr(10)) AS ls
            FROM read_text({file_list})
        ), numbered AS (
            SELECT filename AS _source_file, generate_subscripts(ls, 1)::BIGINT AS _line,
                   unnest(ls) AS raw
            FROM split
        ), lines AS (
            SELECT _source_file, _line,
                   CASE WHEN suffix(raw, chr(13)) THEN raw[:-2] ELSE raw END AS line
            FROM numbered
            -- not blank; `trim` with a set of characters is slow, so only when needed
            WHERE raw <> ''
              AND (left(raw, 1) NOT IN (' ', chr(9), chr(13)) OR trim(raw, E' \\t\\r') <> '')
        ), valid AS (
            SELECT *, json_valid(line) AND left(ltrim(line, E' \\t'), 1) = '{{' AS obj FROM lines
        )
        SELECT _source_file, _line, line, obj,
               CASE WHEN obj THEN json_extract_string(line, ['$.topic', '$.message_id']) END AS env
        FROM valid
        """
    )
    con.execute(
        f"""
        CREATE TABLE corrupt AS
        SELECT {lit(batch_id)} AS _batch_id, {lit(landing)} AS _landing_path, _source_file,
               _line, line AS _corrupt_record, encode(line) AS _corrupt_bytes,
               CASE WHEN NOT json_valid(line) THEN 'invalid JSON'
                    WHEN NOT obj THEN 'not a JSON object'
                    WHEN env[1] IS NULL THEN 'missing topic field `topic`'
                    ELSE 'missing id field `message_id`' END AS _reason,
               {lit(loaded_at)}::TIMESTAMPTZ AS _loaded_at
        FROM checked
        WHERE NOT obj OR env[1] IS NULL OR env[2] IS NULL
        """
    )
    # Duplicates: every occurrence of an id after its first (by file, line); the window
    # sees ids and positions only, the lines are then dropped by an anti-join.
    con.execute(
        """
        CREATE TABLE dropped AS
        SELECT _source_file, _line FROM checked
        WHERE obj AND env[1] IS NOT NULL AND env[2] IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY env[2] ORDER BY _source_file, _line) > 1
        """
    )
    order = "ORDER BY _topic" if sort else ""
    con.execute(
        f"""
        CREATE TABLE staged AS
        SELECT env[2] AS _id, {lit(batch_id)} AS _batch_id, {lit(landing)} AS _landing_path,
               env[1] AS _topic, _source_file, _line,
               {lit(loaded_at)}::TIMESTAMPTZ AS _loaded_at, line
        FROM checked ANTI JOIN dropped USING (_source_file, _line)
        WHERE obj AND env[1] IS NOT NULL AND env[2] IS NOT NULL
        {order}
        """
    )
    (lines,) = con.execute("SELECT count(*) FROM checked").fetchone()
    (duplicates,) = con.execute("SELECT count(*) FROM dropped").fetchone()
    con.execute("DROP TABLE checked")
    return lines, duplicates


def write(con, out, name, sql, delta):
    path = os.path.join(out, f"{name}.parquet")
    con.execute(f"COPY ({sql}) TO {lit(path)} (FORMAT parquet, COMPRESSION snappy)")
    if delta:
        import pyarrow.parquet as pq
        from deltalake import write_deltalake

        table = pq.read_table(path)
        write_deltalake(os.path.join(out, "_delta", name), table, mode="overwrite")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("batch")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-sort", action="store_true", help="do not sort the staged lines by topic")
    ap.add_argument("--delta", action="store_true", help="also write Delta tables")
    args = ap.parse_args()
    started = time.perf_counter()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    batch_id, landing = batch_key(args.batch)
    files = data_files(args.batch)
    if not files:
        sys.exit(f"no data files in {args.batch}")
    loaded_at = datetime.now(timezone.utc).isoformat()

    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    lines, duplicates = stage(con, files, batch_id, landing, loaded_at, not args.no_sort)

    # Each line's structure (`json_structure`, in parallel), the distinct ones merged per
    # topic here: `json_group_structure` would build one JSON array of all the topic's
    # lines and read it again on one thread.
    merged = {}
    for topic, structure in con.execute(
        "SELECT DISTINCT _topic, json_structure(line) FROM staged ORDER BY ALL"
    ).fetchall():
        s = json.loads(structure)
        merged[topic] = merge(merged[topic], s) if topic in merged else s
    structures = sorted(merged.items())

    # Many small statements (a topic is a few hundred rows of a daily batch) run one
    # thread each inside DuckDB: run `threads` of them at once, each on its own cursor.
    local = threading.local()

    def cursor():
        if not hasattr(local, "cur"):
            local.cur = con.cursor()
        return local.cur

    def parse_topic(i, topic, s):
        s = normalize({k: v for k, v in s.items() if k not in ("topic", "message_id")})
        if not isinstance(s, dict):  # nothing but topic and id
            s = {}
        for key, sub in s.items():
            if key != "payload" and isinstance(sub, list):
                s[key] = "JSON"  # an array in the envelope: kept as JSON text
        parsed = f"parsed_{i}"
        j = f", from_json(line, {lit(json.dumps(s))}) AS j" if s else ""
        cursor().execute(
            f"CREATE TABLE {parsed} AS SELECT _id, {', '.join(LINEAGE)}{j} "
            f"FROM staged WHERE _topic = ?",
            [topic],
        )
        return parsed, s

    plan = Plan()
    plan.table_names.add("_corrupt_records")
    with ThreadPoolExecutor(args.threads) as pool:
        parsed = list(pool.map(lambda a: parse_topic(*a), [(i, t, st) for i, (t, st) in enumerate(structures)]))
        for (topic, _), (name, s) in zip(structures, parsed):
            plan_topic(plan, topic, name, s)
        list(pool.map(lambda a: find_optionals(cursor(), plan, a[0][0], a[1][0]), zip(structures, parsed)))
        (messages,) = con.execute("SELECT count(*) FROM staged").fetchone()
        con.execute("DROP TABLE staged")  # the parsed tables hold the rows from here on
        jobs = [(n, part.sql()) for n, part in plan.topics.items()]
        jobs += [(n, " UNION ALL BY NAME ".join(f"({p.sql()})" for p in parts)) for n, parts in plan.children.items()]
        # the biggest child tables first, so that the pool ends together
        jobs.sort(key=lambda job: -job[1].count("UNION ALL"))
        list(pool.map(lambda job: write(cursor(), args.out, job[0], job[1], args.delta), jobs))
    (corrupt,) = con.execute("SELECT count(*) FROM corrupt").fetchone()
    if corrupt:
        write(con, args.out, "_corrupt_records", "SELECT * FROM corrupt ORDER BY _source_file, _line", args.delta)
    wall = time.perf_counter() - started
    tables = len(plan.topics) + len(plan.children) + (1 if corrupt else 0)
    print(
        f"{wall:.3f} s, {lines} lines, {messages} messages, {corrupt} corrupt, "
        f"{duplicates} duplicates, {tables} tables"
    )
    return 1 if corrupt else 0


if __name__ == "__main__":
    sys.exit(main())
