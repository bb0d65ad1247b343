"""The rule engine: YAML rules compiled to Polars expressions, evaluated over frames, ranked into findings.

Public API::

    load_rules(path=None) -> RuleSet         rules/ of the checkout or the installed wheel by default
    evaluate(rules, frames) -> list[Finding]  ranked; exactly one primary when any error finding exists
    default_rules_dir() -> Path
"""

from aoti_trace.engine.loader import RuleSet, default_rules_dir, load_rules
from aoti_trace.engine.schema import Rule

__all__ = ["Rule", "RuleSet", "default_rules_dir", "evaluate", "load_rules"]


def evaluate(rules, frames):  # type: ignore[no-untyped-def]
    """Evaluate ``rules`` (a :class:`RuleSet`) over ``frames``; see :func:`aoti_trace.engine.evaluate.evaluate`."""
    from aoti_trace.engine.evaluate import evaluate as _evaluate

    return _evaluate(rules, frames)
