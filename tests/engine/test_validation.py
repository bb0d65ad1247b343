"""The rule schema's dataclasses (what an analysis uses) and the pydantic models derived from them (what validates
rule files and exports the JSON Schemas) agree: same fields, and validating a rule gives the rule back."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from aoti_trace.engine import schema, validation
from aoti_trace.engine.failure_rules import FAILURE_RULES
from aoti_trace.engine.ruleset import IgnoreEntry
from aoti_trace.library import load_rules
from aoti_trace.model.derive import to_dataclass
from aoti_trace.model.findings import Evidence, Finding
from aoti_trace.report.json import finding_schema

PAIRS = [(schema.Leaf, validation.LeafModel), (schema.All, validation.AllModel), (schema.AnyOf, validation.AnyOfModel),
         (schema.Not, validation.NotModel), (schema.TorchRange, validation.TorchRangeModel),
         (schema.ColumnRef, validation.ColumnRefModel), (schema.Example, validation.ExampleModel),
         (schema.Rule, validation.RuleModel), (IgnoreEntry, validation.IgnoreEntryModel)]


@pytest.mark.parametrize(("cls", "model"), PAIRS, ids=[c.__name__ for c, _ in PAIRS])
def test_each_model_has_the_fields_of_its_dataclass(cls, model):
    declared = [f for f in dataclasses.fields(cls) if f.metadata != {"extra": True}]
    assert list(model.model_fields) == [f.name for f in declared]
    for f in declared:
        info = model.model_fields[f.name]
        assert info.alias == f.metadata.get("alias") and info.description == f.metadata.get("description"), f.name
        if f.default is not dataclasses.MISSING:
            assert info.default == f.default, f.name
        assert info.is_required() == (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    assert model.__name__ == cls.__name__


def test_the_built_in_failure_rules_are_valid_rules():
    for rule in FAILURE_RULES:  # built without validation (start-up): validating them changes nothing
        assert to_dataclass(validation.RuleModel.model_validate(rule, from_attributes=True)) == rule


def test_library_rules_are_dataclasses_all_the_way_down():
    kinds = (schema.Leaf, schema.All, schema.AnyOf, schema.Not)

    def walk(node):
        assert isinstance(node, kinds)
        for child in schema.children(node):
            walk(child)

    rules = load_rules()
    assert rules.ignore and all(type(e) is IgnoreEntry for e in rules.ignore)
    for rule in rules:
        assert type(rule) is schema.Rule
        walk(rule.match)
        assert all(type(e) is schema.Example for e in rule.examples)
        assert all(isinstance(ref, (str, schema.ColumnRef)) for ref in rule.extract.values())
        assert rule.torch is None or type(rule.torch) is schema.TorchRange


def test_example_frames_are_the_undeclared_keys():
    data = {"name": "one", "expect": "match", "lines": "x", "faults": [{"kind": "segv"}]}
    example = to_dataclass(validation.ExampleModel.model_validate(data))
    assert example.frame_rows() == {"faults": [{"kind": "segv"}]} and example.lines == "x"
    with pytest.raises(ValidationError, match="unknown example key"):
        validation.ExampleModel.model_validate({**data, "nope": []})


def test_a_finding_dumps_as_its_json_schema_says():
    import jsonschema

    finding = Finding(run_id="r", rule_id="AOTI-X001", rule_name="x", family="unexplained", severity="error",
                      title="t", message="m", remedy="r", env_flags={"A": "1"}, ranks=[1, 0], first_rank=0,
                      evidence=[Evidence(source="lines", path="p", line=3, text="boom")], fields={"k": "v"})
    dumped = finding.to_json()
    assert list(dumped) == list(finding_schema()["properties"])
    assert dumped["schema"] == "aoti-trace.finding/v1"
    assert dumped["evidence"] == [{"source": "lines", "path": "p", "line": 3, "text": "boom"}]
    jsonschema.validate(dumped, finding_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**dumped, "first_rank": "0"}, finding_schema())
