"""The result dataclasses against the Rust types they mirror, and what a report means
computed by the Rust side."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

import bronze
from bronze import _bronze, _records

SHAPES: dict[str, Any] = json.loads(_bronze.result_shapes())


def _record_type(tp: Any) -> Any:
    """The dataclass a field holds (alone, in a list, as a dict's values or optional),
    or ``None``."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _record_type(inner[0]) if len(inner) == 1 else None
    if origin in (list, dict):
        return _record_type(typing.get_args(tp)[-1])
    return tp if dataclasses.is_dataclass(tp) else None


def _mismatches(tp: Any, value: dict[str, Any], path: str) -> list[str]:
    """Where the dataclass ``tp`` and the JSON object ``value`` differ in keys, recursively
    through the fields holding records."""
    names = {f.name for f in dataclasses.fields(tp)}
    out = []
    if names != value.keys():
        out.append(
            f"{path}: only in Python {sorted(names - value.keys())}, only in Rust {sorted(value.keys() - names)}"
        )
    hints = typing.get_type_hints(tp)
    for name in names & value.keys():
        inner = _record_type(hints[name])
        if inner is None:
            continue
        field = value[name]
        items = field if isinstance(field, list) else [field]
        if typing.get_origin(hints[name]) is dict:
            items = list(field.values())
        for i, item in enumerate(items):
            if item is None:
                continue
            assert isinstance(item, dict), f"{path}.{name}: {item!r} is not a record"
            out += _mismatches(inner, item, f"{path}.{name}[{i}]")
    return out


def _dataclasses() -> dict[str, Any]:
    return {
        name: tp
        for name, tp in vars(_records).items()
        if isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp.__module__ == _records.__name__
    }


def test_every_result_dataclass_has_a_rust_type() -> None:
    assert sorted(_dataclasses()) == sorted(SHAPES)
    assert len(SHAPES) == 21


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_result_dataclass_has_the_fields_of_its_rust_type(name: str) -> None:
    tp = _dataclasses()[name]
    assert _mismatches(tp, SHAPES[name], name) == []
    # Every nested record is present once in the sample, so the check above reached it.
    _records.from_json(tp, json.dumps(SHAPES[name]))


def test_a_field_on_one_side_only_is_found() -> None:
    report = dict(SHAPES["Report"], extra=1)
    assert _mismatches(bronze.Report, report, "Report") == ["Report: only in Python [], only in Rust ['extra']"]
    nested = json.loads(json.dumps(SHAPES["Outcome"]))
    del nested["report"]["folders"][0]["files"]
    assert _mismatches(bronze.Outcome, nested, "Outcome") == [
        "Outcome.report[0].folders[0]: only in Python ['files'], only in Rust []"
    ]


def _report(**fields: Any) -> bronze.Report:
    value = dict(SHAPES["Report"], **fields)
    return _records.from_json(bronze.Report, json.dumps(value))


def test_exit_code_and_summary_come_from_the_rust_report() -> None:
    clean = _report(invariant_ok=True, corrupt_lines=0, tables={})
    assert clean.exit_code == 0
    assert _report(invariant_ok=True, corrupt_lines=3, tables={}).exit_code == 1
    assert _report(invariant_ok=False, corrupt_lines=0, tables={}).exit_code == 2
    failed = dict(SHAPES["Report"]["tables"][""], error="boom")
    assert _report(invariant_ok=True, tables={"t": failed}).exit_code == 2
    line = _report(batch="", batch_id="b1", files_read=2, lines=7, elapsed=1.234).summary()
    assert line == (
        "batch b1 (staging: memory): 2 files read (0 skipped), 0 bytes, 7 lines, 0 messages, "
        "0 topics, 0 corrupt, 0 duplicates, 1.23s"
    )
    assert _report(batch="s/e/batch_id=b1", batch_id="b1").summary().startswith("batch s/e/batch_id=b1 (")
