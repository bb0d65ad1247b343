"""The rule engine: YAML rules compiled to Polars expressions, evaluated over frames, ranked into findings.

Public API::

    load_rules(path=None) -> RuleSet          rules/ of the checkout, or aoti_trace/_rules of the wheel, by default
    evaluate(rules, frames) -> list[Finding]  ranked; exactly one primary when any error finding exists
    default_rules_dir() -> Path

Modules: schema (pydantic models), loader (YAML + positions), compile (every Polars call), evaluator, rank,
reasoners (computed enrichment), testing (example harness), lint.
"""

from aoti_trace.engine.evaluator import evaluate
from aoti_trace.engine.loader import RuleSet, default_rules_dir, load_rules
from aoti_trace.engine.schema import Rule

__all__ = ["Rule", "RuleSet", "default_rules_dir", "evaluate", "load_rules"]
