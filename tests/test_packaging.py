"""Packaging metadata: typed, classified, torch pinned only for the tests, the report schema committed."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from aoti_trace.report.json import SCHEMA_FILE, SCHEMA_ID, document_schema, schema_text

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_py_typed_and_metadata():
    assert (REPO / "aoti_trace" / "py.typed").is_file()
    assert "Typing :: Typed" in PROJECT["classifiers"]
    assert {"Homepage", "Issues", "Source"} <= set(PROJECT["urls"])
    assert any(d.startswith("markdown-it-py") for d in PROJECT["dependencies"])  # the HTML report renders with it
    assert not any(d.startswith("torch") for d in PROJECT["dependencies"])  # analysis never imports torch


def test_torch_pinned_only_in_the_test_extra():
    extras = PROJECT["optional-dependencies"]
    assert extras["torch"] == ["torch>=2.3"]
    assert "torch==2.13.0" in extras["test"]


def test_report_schema_is_committed_with_its_id():
    path = REPO / SCHEMA_FILE
    assert path.read_text(encoding="utf-8") == schema_text(), "regenerate: python -m aoti_trace.report.json > " + SCHEMA_FILE
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == SCHEMA_ID and SCHEMA_ID.endswith("/" + SCHEMA_FILE)
    assert SCHEMA_ID.startswith(PROJECT["urls"]["Source"].replace("https://github.com/", "https://raw.githubusercontent.com/"))
    assert schema == document_schema()
