"""The rule test harness for inline examples, through the production code paths (the fixture corpus has its own
harness, :mod:`aoti_trace.corpus`, shared with the scoreboard).

* Inline examples: each example's rows become frames (:func:`example_frames`, via ``aoti_trace.model.frames.conform``),
  and the **whole** rule set is evaluated with the production :func:`aoti_trace.engine.evaluate` (ignore list,
  torch ranges, supersedes and ranking included). ``match``: the rule must produce a finding whose fields include
  the expected ones; ``no_match``: it must produce none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


from aoti_trace.engine import query
from aoti_trace.engine.evaluator import evaluate
from aoti_trace.engine.ruleset import RuleSet
from aoti_trace.engine.schema import Example, Rule
from aoti_trace.model.findings import Finding
from aoti_trace.model.frames import Frames

EXAMPLE_RUN = "example"
EXAMPLE_PATH = "<example>"


def _text_rows(text: str, stream: str) -> list[dict[str, Any]]:
    return [
        {"stream": stream, "text": line}
        for line in text.split("\n")[: -1 if text.endswith("\n") else None]
    ]


def example_frames(example: Example) -> Frames:
    """Frames built from an example: ``lines``/``stdout`` text and any frame given as row dicts."""
    tables: dict[str, list[dict[str, Any]]] = {}
    if isinstance(example.lines, str):
        tables.setdefault("lines", []).extend(_text_rows(example.lines, "stderr"))
    elif example.lines:
        tables.setdefault("lines", []).extend({"stream": "stderr", **row} for row in example.lines)
    if example.stdout:
        tables.setdefault("lines", []).extend(_text_rows(example.stdout, "stdout"))
    for name, rows in example.frame_rows().items():
        tables.setdefault(name, []).extend(rows)
    frames = Frames()
    for name, rows in tables.items():
        filled = []
        for i, row in enumerate(rows, start=1):
            base: dict[str, Any] = {"run_id": EXAMPLE_RUN}
            if name != "process":
                base.update(path=EXAMPLE_PATH, lineno=i)
            filled.append({**base, **row})
        frames.add(name, query.frame_from_rows(name, filled))
    return frames


@dataclass
class ExampleResult:
    rule_id: str
    example: str
    expect: str
    outcome: str  # TP | TN | FP | FN
    passed: bool
    xfail: str | None = None
    detail: str = ""
    findings: list[Finding] = field(default_factory=list)


def run_example(ruleset: RuleSet, rule: Rule, example: Example) -> ExampleResult:
    findings = evaluate(ruleset, example_frames(example))
    mine = [f for f in findings if f.rule_id == rule.id]
    detail = ""
    if example.expect == "match":
        outcome = "TP" if mine else "FN"
        if mine and example.fields:
            got = mine[0].fields
            wrong = {k: (v, got.get(k)) for k, v in example.fields.items() if got.get(k) != v}
            if wrong:
                outcome = "FN"
                detail = "; ".join(f"field {k}: expected {v!r}, got {g!r}" for k, (v, g) in wrong.items())
        elif not mine:
            others = [f.rule_id for f in findings]
            detail = "no finding" + (f" (fired instead: {', '.join(others)})" if others else "")
    else:
        outcome = "FP" if mine else "TN"
        if mine:
            detail = f"fired on: {mine[0].evidence[0].text if mine[0].evidence else mine[0].message}"
    passed = outcome in ("TP", "TN")
    if example.xfail:
        passed = True
    return ExampleResult(rule.id, example.name, example.expect, outcome, passed, example.xfail, detail, findings)


def run_examples(ruleset: RuleSet, only: list[Rule] | None = None) -> list[ExampleResult]:
    """Results of every inline example of ``only`` (default: every rule of ``ruleset``). A deprecated rule is not
    evaluated, so its examples are not run."""
    out: list[ExampleResult] = []
    for rule in only if only is not None else ruleset.rules:
        if rule.status == "deprecated":
            continue
        for example in rule.examples:
            out.append(run_example(ruleset, rule, example))
    return out


def confusion(results: list[ExampleResult]) -> dict[str, dict[str, int]]:
    """Per rule: counts of TP, TN, FP, FN (xfail examples counted as they came out)."""
    table: dict[str, dict[str, int]] = {}
    for r in results:
        row = table.setdefault(r.rule_id, {"TP": 0, "TN": 0, "FP": 0, "FN": 0})
        row[r.outcome] += 1
    return table


# ---------------------------------------------------------------------------------------------- fixture corpus
