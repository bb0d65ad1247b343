"""Ranking: order findings and choose the primary one.

Sort key, most important first:

1. severity: error > warning > info;
2. role: cause > symptom > carrier > noise (a symptom, carrier or noise finding never outranks a cause of the
   same severity; noise rules cannot be errors, lint enforces it);
3. precision: very-high > high > medium > low;
4. the rule's ``priority`` (higher first);
5. position of the anchor: earlier line first (the first real error is usually the root cause); rows without a
   line number after those with one;
6. rule id, then run id (determinism).

The first finding with severity ``error`` becomes the primary. With no error finding, the first ``warning``
finding whose role is ``cause`` is primary (e.g. a deprecated API that still works); symptoms, carriers, noise
and ``info`` findings alone give no primary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from aoti_trace.engine.schema import Rule
from aoti_trace.model.findings import Finding
from aoti_trace.model.vocabulary import PRECISIONS, ROLES, SEVERITIES


@dataclass
class Ranked:
    """A finding plus what ranking needs but the JSON contract does not carry."""

    finding: Finding
    rule: Rule
    position: tuple[int | None, int] = (None, 0)  # (anchor lineno, row index in its frame)


def sort_key(item: Ranked) -> tuple[Any, ...]:
    rule, (line, row) = item.rule, item.position
    return (
        SEVERITIES.index(rule.severity),
        ROLES.index(rule.role),
        PRECISIONS.index(rule.precision),
        -rule.priority,
        line is None,
        line if line is not None else 0,
        row,
        rule.id,
        item.finding.run_id,
    )


def rank(items: list[Ranked]) -> list[Finding]:
    """Findings in rank order; the best error (else warning) finding is marked ``primary``."""
    ordered = sorted(items, key=sort_key)
    # Sorted by severity first, so the first error-or-warning finding is the primary.
    top = next((i for i, item in enumerate(ordered)
                if item.finding.severity == "error"
                or (item.finding.severity == "warning" and item.rule.role == "cause")), None)
    return [replace(item.finding, primary=i == top) for i, item in enumerate(ordered)]
