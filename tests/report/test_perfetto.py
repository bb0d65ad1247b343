"""``analyze --perfetto FILE``: the trace's chromium events as Chrome Trace Event JSON, on real fixture traces,
checked against the committed Trace Event Format schema (tests/data/schemas/trace-event.schema.json)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from aoti_trace.pipeline import analyze
from aoti_trace.cli import main
from aoti_trace.report import render
from aoti_trace.report.common import tlparse_command

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "fixtures" / "cases"
SCHEMA = json.loads((REPO / "tests" / "data" / "schemas" / "trace-event.schema.json").read_text(encoding="utf-8"))


def _cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def test_schema_is_a_valid_schema_and_rejects_broken_events():
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    v = jsonschema.Draft7Validator(SCHEMA)
    assert v.is_valid({"traceEvents": [{"name": "a", "ph": "B", "ts": 1.0, "pid": 1, "tid": 0}]})
    assert not v.is_valid({"traceEvents": [{"name": "a", "ph": "X", "ts": 1.0, "pid": 1, "tid": 0}]})  # no dur
    assert not v.is_valid({"traceEvents": [{"name": "a", "ph": "B", "pid": 1, "tid": 0}]})  # no ts
    assert not v.is_valid({"traceEvents": [{"name": "a", "ph": "Q", "ts": 1, "pid": 1, "tid": 0}]})
    assert not v.is_valid([{"name": "a", "ph": "B", "ts": 1, "pid": 1, "tid": 0}])  # the object format


def test_perfetto_export_of_real_traces(tmp_path, capsys):
    cases = [CASES / "cpp_compile_error", CASES / "constant_loading"]
    out = tmp_path / "trace.json"
    assert _cli(["analyze", *map(str, cases), "--perfetto", str(out), "--fail-on", "never"]) == 0
    assert "chromium events written to" in capsys.readouterr().err
    doc = json.loads(out.read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft7Validator(SCHEMA).iter_errors(doc))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]

    a = analyze(cases)
    records = a.frames["events"].filter(pl.col("event") == "chromium_event")
    events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert len(events) == records.height == doc["otherData"]["events"] > 100 and doc["otherData"]["skipped"] == 0
    # one process per run (torch writes pid 0 in both), named after it
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert len({e["pid"] for e in events}) == 2 and any(n.startswith("cpp_compile_error") for n in names)
    # each run's compile_fx_aot phase is there: begun, and ended at most once per begin
    for pid in {e["pid"] for e in events}:
        phases = [e["ph"] for e in events if e["pid"] == pid and e["name"] == "compile_fx_aot"]
        assert phases.count("B") >= 1 and phases.count("E") <= phases.count("B")
    assert events[0]["ts"] > 1e15 and events[0]["cat"]  # microseconds since the epoch, as torch writes them


def test_no_trace_gives_an_empty_valid_file(tmp_path):
    out = tmp_path / "t.json"
    assert _cli(["analyze", "--stderr", str(REPO / "tests" / "data" / "text" / "aoti_dtype.stderr.txt"),
                 "--perfetto", str(out), "--fail-on", "never"]) == 0
    doc = json.loads(out.read_text())
    assert doc["traceEvents"] == [] and jsonschema.Draft7Validator(SCHEMA).is_valid(doc)


def test_tlparse_command_is_suggested_when_a_trace_is_present():
    a = analyze([CASES / "cpp_compile_error"])
    (run,) = a.runs
    cmd = tlparse_command(a, run.run_id)
    assert cmd == f"tlparse {run.trace_files[0]}"  # no provenance artifacts in this capture
    assert f"tlparse: {cmd}" in render(a, "text") and f"`{cmd}`" in render(a, "markdown")
    b = analyze([], stderr=REPO / "tests" / "data" / "text" / "aoti_dtype.stderr.txt")
    assert tlparse_command(b, b.runs[0].run_id) is None and "tlparse" not in render(b, "text")
