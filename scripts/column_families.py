"""Compressed bytes per column family of bronze's tables (ids, lineage, rescued, payload; child
and topic tables apart), summed from the Parquet column-chunk metadata of every data file.
usage: .venv/bin/python scripts/column_families.py <catalog>/<schema> [--tables]"""
import sys, glob, os, collections
import pyarrow.parquet as pq
IDS = ["_id", "_parent_id", "_root_id", "_idx"]
LINEAGE = ["_batch_id", "_landing_path", "_topic", "_source_file", "_line", "_loaded_at"]
def family(col):
    if col in IDS: return "ids"
    if col in LINEAGE: return "lineage"
    if col == "_rescued_data": return "rescued"
    return "payload"
root = sys.argv[1]
agg = {k: collections.Counter() for k in ("child", "topic")}
percol = {k: collections.Counter() for k in ("child", "topic")}
rows = collections.Counter(); ntab = collections.Counter()
pertable = []
for t in sorted(os.listdir(root)):
    if t.startswith("_"): continue
    files = glob.glob(f"{root}/{t}/*.parquet")
    if not files: continue
    kind = None; tb = collections.Counter()
    for f in files:
        m = pq.ParquetFile(f).metadata
        names = [m.schema.column(j).path.split(".")[0] for j in range(m.num_columns)]
        kind = "child" if "_parent_id" in names else "topic"
        rows[kind] += m.num_rows
        for i in range(m.num_row_groups):
            rg = m.row_group(i)
            for j in range(rg.num_columns):
                c = rg.column(j); top = c.path_in_schema.split(".")[0]
                agg[kind][family(top)] += c.total_compressed_size
                percol[kind][top if family(top) != "payload" else "(payload)"] += c.total_compressed_size
                tb[family(top)] += c.total_compressed_size
    ntab[kind] += 1
    pertable.append((t, kind, sum(tb.values()), tb["ids"], tb["lineage"], tb["payload"]))
MB = 1e6
for kind in ("child", "topic"):
    tot = sum(agg[kind].values())
    print(f"{kind} tables: {ntab[kind]}, rows {rows[kind]:,}, total {tot/MB:.2f} MB")
    for fam, b in agg[kind].most_common():
        print(f"  family {fam:8s} {b/MB:9.3f} MB  {100*b/tot:5.1f} %")
    for col, b in percol[kind].most_common():
        print(f"    {col:14s} {b/MB:9.3f} MB  {100*b/tot:5.1f} %")
allb = sum(sum(a.values()) for a in agg.values())
print(f"all tables: {allb/MB:.2f} MB (data files, column chunks)")
if "--tables" in sys.argv:
    for r in sorted(pertable, key=lambda r: -r[2]):
        print(f"  {r[0]:16s} {r[1]:5s} total {r[2]/MB:7.3f} ids {r[3]/MB:7.3f} lineage {r[4]/MB:7.3f} payload {r[5]/MB:7.3f}")
