"""The finding record: what a rule reports. This is the JSON contract (schema ``aoti-trace.finding/v1``).

A finding is produced by the rule engine (``aoti_trace.engine``) and consumed by every report format.
Exactly one finding of an analysis is ``primary`` whenever any finding has severity ``error``.

Both records are frozen dataclasses (change one with :func:`dataclasses.replace`); each field's ``metadata`` holds
the keyword arguments of its pydantic ``Field``, from which the JSON Schema is derived
(:func:`aoti_trace.report.json.finding_schema`). Nothing validates a finding: the engine builds them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# The vocabulary lives in one module; these names are re-exported for the JSON contract's users.
from aoti_trace.model.vocabulary import FAMILIES as FAMILIES, SEVERITIES as SEVERITIES  # explicit re-exports (mypy)
from aoti_trace.model.vocabulary import Family, Precision, Role, Severity

SCHEMA = "aoti-trace.finding/v1"
MAX_EVIDENCE_TEXT = 640  # characters of one evidence item's text (a cited line's decoration not counted)
# a clipped text keeps this much of its end: a long line's verdict is often last ("... returned non-zero exit status
# 1.", "... died with <Signals.SIGSEGV: 11>.", a compiler command's output file)
CLIP_TAIL = 160
ELLIPSIS = " … "


def clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: whole when it fits, else its head and its last ``CLIP_TAIL``
    characters joined by " … " (so that both the start of a long line and its end stay quotable)."""
    if len(text) <= limit:
        return text
    tail = min(CLIP_TAIL, limit // 3)
    return text[:limit - tail - len(ELLIPSIS)] + ELLIPSIS + text[len(text) - tail:]


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """One piece of evidence: a row of a frame, located in a source file."""

    source: str = field(metadata={"description": "frame the row came from, e.g. 'lines', 'compiles', 'package'"})
    path: str | None = field(default=None, metadata={"description": "file the text was read from"})
    line: int | None = field(default=None, metadata={"description": "1-based line number in that file"})
    text: str = field(metadata={"description": "the matched text (one line, or a short excerpt)"})


@dataclass(frozen=True, kw_only=True)
class Finding:
    """What one rule concluded about one run."""

    schema_: str = field(default=SCHEMA, metadata={"alias": "schema"})
    run_id: str
    rule_id: str
    rule_name: str
    family: Family
    severity: Severity
    role: Role = field(default="cause", metadata={
        "description": "cause: the root cause; symptom/carrier/noise never outrank a cause"})
    precision: Precision = field(default="high", metadata={
        "description": "how often the rule is right when it fires"})
    rule_version: int = 1
    title: str
    message: str
    remedy: str
    guide: str | None = None
    env_flags: dict[str, str] = field(default_factory=dict)
    rerun: str | None = field(default=None, metadata={
        "description": "copy-paste command that reruns with env_flags"})
    evidence: list[Evidence] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    fingerprint: str = ""
    primary: bool = False
    ranks: list[int] = field(default_factory=list, metadata={
        "description": "ranks of a distributed run the evidence came from (empty: not a multi-rank run, or no rank "
                       "known)"})
    first_rank: int | None = field(default=None, metadata={
        "description": "of those ranks, the one that failed first (by time stamp, else by position in the log)"})

    def to_json(self) -> dict[str, Any]:
        """The JSON-contract dict (``schema`` key, not ``schema_``)."""
        return {("schema" if k == "schema_" else k): v for k, v in asdict(self).items()}
