"""Every rule of the bundled library loads, lints clean and passes its own inline examples.

Generic: it covers every file under rules/ (one test item per rule and per example), so new rules are tested
without new test code.
"""

from __future__ import annotations

import json

import pytest

from aoti_trace.library.loader import default_rules_dir, load_rules
from aoti_trace.library.lint import lint
from aoti_trace.engine.validation import rule_json_schema
from aoti_trace.engine.testing import run_example

RULES = load_rules(default_rules_dir())
PROBLEMS = lint(RULES)


def test_library_is_not_empty():
    assert len(RULES) >= 3
    assert RULES.ignore, "rules/ignore.yaml is loaded"


@pytest.mark.parametrize("rule", RULES.rules, ids=lambda r: f"{r.id}-{r.name}")
def test_rule_lints_clean(rule):
    errors = [str(p) for p in PROBLEMS if p.rule_id == rule.id and p.level == "error"]
    assert not errors, "\n".join(errors)


# a deprecated rule is not evaluated (its replacement fires instead), so its examples are not run
EXAMPLES = [(rule, ex) for rule in RULES.rules if rule.status != "deprecated" for ex in rule.examples]


@pytest.mark.corpus
@pytest.mark.parametrize("rule,example", EXAMPLES, ids=[f"{r.id}-{e.name}" for r, e in EXAMPLES])
def test_rule_example(rule, example):
    result = run_example(RULES, rule, example)
    if example.xfail:
        pytest.xfail(example.xfail)
    assert result.passed, f"{rule.id} {example.name}: expected {example.expect}, got {result.outcome} {result.detail}"


def test_exported_json_schema_is_current():
    on_disk = json.loads((default_rules_dir() / "rule.schema.json").read_text())
    assert on_disk == rule_json_schema(), "regenerate: python -m aoti_trace.engine > rules/rule.schema.json"
