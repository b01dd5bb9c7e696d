"""Every setting reaches the run under the same name from Python's keyword arguments as
from ``bronze.toml``, and the functions take the same setting names as their CLI twins."""

from __future__ import annotations

import datetime
import inspect
from pathlib import Path
from typing import Any

import pytest

import bronze
from bronze import _bronze

#: (``bronze.toml`` text, Python keyword arguments) per setting.
CASES: list[tuple[str, dict[str, Any]]] = [
    ('catalog = "/data/lake"', {"catalog": "/data/lake"}),
    ('schema = "raw"', {"schema": "raw"}),
    ('[storage]\nAWS_REGION = "eu-west-1"', {"storage_options": {"AWS_REGION": "eu-west-1"}}),
    ('batch_id = "b1"', {"batch_id": "b1"}),
    ('landing_path = "s/e"', {"landing_path": "s/e"}),
    ("max_parallel = 3", {"max_parallel": 3}),
    ("threads = 3", {"threads": 3}),
    ('memory_budget = "64MiB"', {"memory_budget": "64MiB"}),
    ("persist_staging = true", {"persist_staging": True}),
    ("resume = false", {"resume": False}),
    ('lease_ttl = "90s"', {"lease_ttl": datetime.timedelta(seconds=90)}),
    ("full_listing_every = 3600", {"full_listing_every": "1h"}),
    ("single_writer = true", {"single_writer": True}),
    ('target_file_size = "64MiB"', {"target_file_size": "64MiB"}),
    ('compression = "zstd(3)"', {"compression": "zstd(3)"}),
    ("auto_compact = false", {"auto_compact": False}),
    ("auto_compact_min_files = 10", {"auto_compact_min_files": 10}),
    ("batch_lease = false", {"batch_lease": False}),
    ('lock_policy = "global"', {"lock_policy": "global"}),
    ('commit_per = "topic"', {"commit_per": "topic"}),
    ('format = "array"', {"format": "array"}),
    ('late_files = "report"', {"late_files": "report"}),
    ('[envelope]\ntopic_field = "type"', {"envelope": {"topic_field": "type"}}),
    ('[envelope]\nid_field = ""', {"envelope": {"id_field": ""}}),
    ('[envelope]\npayload_field = ""', {"envelope": {"payload_field": ""}}),
    ('[envelope]\ndedup_fields = ["source", "seq"]', {"envelope": {"dedup_fields": ["source", "seq"]}}),
    ("[flatten]\nmax_depth = 4", {"flatten": {"max_depth": 4}}),
    ('[flatten]\ntypes = "strings"', {"flatten": {"types": "strings"}}),
    ('[flatten]\nevolution = "rescue"', {"flatten": {"evolution": "rescue"}}),
    ('[flatten]\nchild_naming = "topic"', {"flatten": {"child_naming": "topic"}}),
    (
        '[flatten.child_tables]\n"quotes[].currentprice" = "prices"',
        {"flatten": {"child_tables": {"quotes[].currentprice": "prices"}}},
    ),
    ('[topics."market.quote"]\nevolution = "fail"', {"topics": {"market.quote": {"evolution": "fail"}}}),
    ('[topics."market.event"]\npayload = "variant"', {"topics": {"market.event": {"payload": "variant"}}}),
    ('[flatten]\ndetect_types = ["timestamp", "date"]', {"detect_types": ["timestamp", "date"]}),
    ('[flatten.column_types]\n"/amount" = "decimal(18,2)"', {"column_types": {"/amount": "decimal(18,2)"}}),
    ('[flatten.column_types]\n"/doc" = "variant"', {"column_types": {"/doc": "variant"}}),
    (
        '[topics."market.trade".column_types]\n"/ts" = "timestamp"',
        {"column_types": {"market.trade:/ts": "timestamp"}},
    ),
    ('[metrics]\npush_url = "http://gw:9091"', {"metrics_push": "http://gw:9091"}),
    (
        '[metastore]\nkind = "glue"\nregion = "r"\nendpoint = "http://e"\ndatabase = "b_{entity}"\ntimeout = "5s"',
        {"metastore": {"kind": "glue", "region": "r", "endpoint": "http://e", "database": "b_{entity}", "timeout": "5s"}},
    ),
    (
        '[metastore]\nkind = "unity"\nuri = "http://uc"\ntoken_env = "UC_TOKEN"\ndatabase = "main.b"',
        {"metastore": {"kind": "unity", "uri": "http://uc", "token_env": "UC_TOKEN", "database": "main.b"}},
    ),
    (
        '[metastore]\nkind = "hive"\nuri = "thrift://h:9083"\nown_tables = true',
        {"metastore": {"kind": "hive", "uri": "thrift://h:9083", "own_tables": True}},
    ),
]


def _from_python(**kw: Any) -> str:
    """The run's configuration from keyword arguments, as ``bronze.ingest`` passes them."""
    return _bronze.resolved_settings(bronze._settings(kw.pop("catalog", None), **kw))


def _from_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bronze.toml"
    path.write_text(text + "\n", encoding="utf-8")
    return _bronze.resolved_settings(bronze._settings(None, config=path))


@pytest.mark.parametrize("toml,kwargs", CASES, ids=[next(iter(kw)) + ":" + toml.split("\n")[-1] for toml, kw in CASES])
def test_a_keyword_argument_sets_what_its_bronze_toml_key_sets(tmp_path: Path, toml: str, kwargs: dict[str, Any]) -> None:
    file = _from_file(tmp_path, toml)
    assert file != _from_python()
    assert _from_python(**kwargs) == file


def test_the_table_holds_every_setting() -> None:
    merged: dict[str, Any] = {}
    for _, kwargs in CASES:
        for key, value in kwargs.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    catalog = merged.pop("catalog")
    assert _bronze.unset_settings(bronze._settings(catalog, **merged)) == []


def test_column_types_merge_into_flatten_and_win_for_a_pointer_in_both(tmp_path: Path) -> None:
    both = _from_python(
        flatten={"max_depth": 4, "column_types": {"/a": "int64", "/b": "date"}},
        column_types={"/b": "string", "/c": "json"},
    )
    toml = '[flatten]\nmax_depth = 4\n[flatten.column_types]\n"/a" = "int64"\n"/b" = "string"\n"/c" = "json"'
    assert both == _from_file(tmp_path, toml)
    detect = _from_python(flatten={"max_depth": 4, "detect_types": ["date"]}, detect_types=["timestamp"])
    assert detect == _from_file(tmp_path, '[flatten]\nmax_depth = 4\ndetect_types = ["timestamp"]')


def test_detect_types_takes_one_string_as_the_flag_does(tmp_path: Path) -> None:
    one = _from_file(tmp_path, '[flatten]\ndetect_types = ["timestamp"]')
    assert _from_python(detect_types="timestamp") == one
    two = _from_file(tmp_path, '[flatten]\ndetect_types = ["timestamp", "date"]')
    assert _from_python(detect_types="timestamp,date") == two
    with pytest.raises(TypeError, match="column_types is a mapping"):
        _from_python(column_types=["/a=int64"])


@pytest.mark.parametrize(
    "kwargs,text",
    [
        ({"compression": "zstd(30)"}, r'"zstd\(30\)" is not a compression \(the zstd level is 1 to 22\)'),
        ({"compression": "brotli"}, r'"brotli" is not a compression; write snappy, lz4_raw, zstd, zstd\(3\)'),
        ({"target_file_size": "big"}, r'"big" is not a size; write e\.g\. 512MB or 2GiB'),
        ({"target_file_size": 10}, "10 bytes is below the 1 KiB minimum"),
        ({"auto_compact_min_files": 0}, "must be at least 1"),
        ({"lock_policy": "per_topic"}, "unknown variant `per_topic`, expected one of `per_table`, `global`, `none`"),
        ({"commit_per": "batch"}, "unknown variant `batch`, expected `table` or `topic`"),
    ],
)
def test_a_bad_write_setting_names_its_key_and_what_it_takes(kwargs: dict[str, Any], text: str) -> None:
    key = next(iter(kwargs))
    with pytest.raises(bronze.ConfigError, match=f"`{key}`: {text}"):
        _from_python(**kwargs)


#: The public functions that take settings: each takes every key of ``bronze.toml``.
FUNCTIONS = [
    bronze.ingest,
    bronze.ingest_pending,
    bronze.pending,
    bronze.status,
    bronze.health,
    bronze.history,
    bronze.report,
    bronze.optimize,
    bronze.vacuum,
    bronze.checkpoint,
    bronze.maintain,
]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_a_function_takes_every_setting_by_name(function: Any) -> None:
    parameters = inspect.signature(function).parameters
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert {"schema", "storage_options", "config"} <= parameters.keys()


def test_the_catalog_functions_pass_their_settings_on(tmp_path: Path) -> None:
    catalog, landing = tmp_path / "lakehouse", tmp_path / "landing"
    landing.mkdir()
    lease = {"lease_ttl": "10m", "full_listing_every": "1h", "single_writer": True}
    assert bronze.pending(landing, catalog, **lease) == []
    assert bronze.status(landing, catalog, **lease) == []
    assert bronze.health(catalog, single_writer=True) == []
    assert bronze.maintain(catalog, single_writer=True).tables == []
    assert bronze.checkpoint(catalog, [], single_writer=True) == []
    assert bronze.optimize(catalog, [], single_writer=True) == []
    assert bronze.vacuum(catalog, [], single_writer=True) == []
    assert bronze.report(catalog, landing=landing, lease_ttl="10m", single_writer=True).startswith("<!DOCTYPE html>")
    for function, args in [(bronze.pending, (landing, catalog)), (bronze.health, (catalog,))]:
        with pytest.raises(bronze.ConfigError, match="lease_ttl"):
            function(*args, lease_ttl="soon")
        with pytest.raises(bronze.ConfigError, match="unknown field `no_such_setting`"):
            function(*args, no_such_setting=1)
