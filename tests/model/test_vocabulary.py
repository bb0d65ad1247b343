"""One definition of each vocabulary term (aoti_trace.model.vocabulary): every other place that states it agrees.

The places checked: the modules that use a term (they import it, they do not restate it), the rule schema
(rules/rule.schema.json), the JSON report schema (docs/schemas/), the rule-format document and the frame schemas.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest

from aoti_trace.model import findings, frames, vocabulary
from aoti_trace.engine import schema as rule_schema

ROOT = Path(__file__).resolve().parents[2]
TERMS = {"family": vocabulary.FAMILIES, "severity": vocabulary.SEVERITIES, "role": vocabulary.ROLES,
         "precision": vocabulary.PRECISIONS}


def test_modules_import_the_terms_instead_of_restating_them():
    assert findings.FAMILIES is vocabulary.FAMILIES and findings.SEVERITIES is vocabulary.SEVERITIES
    assert rule_schema.PRECISIONS is vocabulary.PRECISIONS and rule_schema.ROLES is vocabulary.ROLES
    assert typing.get_type_hints(findings.Finding)["precision"] is vocabulary.Precision
    # no module but model/vocabulary.py spells out one of these closed sets (as a Literal, a tuple, a list or a set)
    spelled = {term: r",\s*".join(re.escape(json.dumps(v)) for v in values[:4]) for term, values in TERMS.items()}
    for path in (ROOT / "aoti_trace").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() == "aoti_trace/model/vocabulary.py":
            continue
        text = path.read_text(encoding="utf-8")
        for term, pattern in spelled.items():
            assert not re.search(pattern, text), f"{path.relative_to(ROOT)} restates the {term} values"


@pytest.mark.parametrize("where", ["rules/rule.schema.json", "docs/schemas/aoti-trace.report-v1.schema.json"])
def test_json_schemas_list_the_same_values(where):
    doc = json.loads((ROOT / where).read_text())
    props = doc["properties"] if "family" in doc.get("properties", {}) else doc["$defs"]["Finding"]["properties"]
    for term, values in TERMS.items():
        assert props[term]["enum"] == list(values), (where, term)


def test_rule_format_document_names_every_term():
    doc = (ROOT / "docs" / "rule-format.md").read_text(encoding="utf-8")
    row = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", doc, re.M)}
    for term in ("severity", "role", "precision"):
        assert re.findall(r"`([\w-]+)`", re.split(r"(?<!\\)\|", row[term])[3]) == list(TERMS[term]), term
    for family in vocabulary.FAMILIES:  # the id-letter list of the `id` row
        assert re.search(rf"\b[A-Z] {family}\b|and {family}\b", row["id"]), family


def test_text_columns_are_columns_of_their_frames():
    for frame, column in frames.TEXT_COLUMNS.items():
        assert column in frames.SCHEMAS[frame][1], (frame, column)
    assert set(vocabulary.CARRIER_FAMILIES) <= set(vocabulary.FAMILIES)


def test_one_definition_of_user_code():
    from aoti_trace.ingest.trace import meta as trace_meta

    assert not hasattr(trace_meta, "is_user_file")
    for path, user in [("/home/me/train.py", True), ("/venv/lib/python3.11/site-packages/transformers/x.py", True),
                       ("/venv/lib/python3.11/site-packages/torch/export/x.py", False),
                       ("/usr/lib/python3.11/runpy.py", False), ("<string>", False),
                       # Triton compiles torch's kernels: its files are not the user's (a user's own kernels are)
                       ("/venv/lib/python3.10/site-packages/triton/backends/amd/compiler.py", False),
                       ("/home/me/triton/python/triton/compiler/compiler.py", False),
                       ("/home/me/kernels/triton_attention.py", True),
                       # Windows: an installed Python's and a conda env's standard library, not their site-packages
                       ("C:\\Python311\\Lib\\subprocess.py", False),
                       ("E:\\Miniconda\\envs\\g\\Lib\\subprocess.py", False),
                       ("E:\\Miniconda\\envs\\g\\Lib\\site-packages\\diffusers\\x.py", True),
                       ("C:\\work\\model.py", True)]:
        assert vocabulary.is_user(path) is user, path


def test_frames_document_is_generated_from_the_schemas():
    """docs/frames.md is ``python -m aoti_trace.model.frames`` (the frame schemas' one description)."""
    assert (ROOT / "docs" / "frames.md").read_text(encoding="utf-8") == frames.markdown()


def test_triton_config_heuristics_are_code_generation_not_autotuning():
    # a kernel's configs are built (and checked) when Inductor loads its module: the compile, not a benchmark
    frames = [("torch/_inductor/runtime/triton_heuristics.py", "check_config"),
              ("torch/_inductor/runtime/triton_heuristics.py", "triton_config_reduction")]
    assert vocabulary.route_phase(frames)[0] == "lowering"
    assert vocabulary.route_phase([("torch/_inductor/runtime/triton_heuristics.py", "autotune_to_one_config")])[0] \
        == "autotune"
