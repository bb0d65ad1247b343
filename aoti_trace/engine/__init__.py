"""The rule engine: YAML rules compiled to Polars expressions, evaluated over frames, ranked into findings. It reads
no files: rules come as a :class:`RuleSet` (:mod:`aoti_trace.library` loads them), facts as frames.

Public API::

    evaluate(rules, frames) -> list[Finding]  ranked; exactly one primary when any error finding exists

Modules: schema (a rule's dataclasses), validation (their pydantic models: rule files checked, the JSON Schema),
ruleset (a loaded rule set), query (rules compiled to Polars expressions, and matching),
evaluator, rank (ordering findings), attribution (the process ranks of a finding), consequences, failure_rules,
reasoners (computed enrichment), kernel_lookup, testing (rule-example harness).
"""

from aoti_trace.engine.evaluator import evaluate
from aoti_trace.engine.ruleset import RuleSet
from aoti_trace.engine.schema import Rule

__all__ = ["Rule", "RuleSet", "evaluate"]
