"""The finding record: what a rule reports. This is the JSON contract (schema ``aoti-trace.finding/v1``).

A finding is produced by the rule engine (``aoti_trace.engine``) and consumed by every report format.
Exactly one finding of an analysis is ``primary`` whenever any finding has severity ``error``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The vocabulary lives in one module; these names are re-exported for the JSON contract's users.
from aoti_trace.model.vocabulary import FAMILIES as FAMILIES, SEVERITIES as SEVERITIES  # explicit re-exports (mypy)
from aoti_trace.model.vocabulary import Family, Precision, Role, Severity

SCHEMA = "aoti-trace.finding/v1"


class Evidence(BaseModel):
    """One piece of evidence: a row of a frame, located in a source file."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="frame the row came from, e.g. 'lines', 'compiles', 'package'")
    path: str | None = Field(default=None, description="file the text was read from")
    line: int | None = Field(default=None, description="1-based line number in that file")
    text: str = Field(description="the matched text (one line, or a short excerpt)")


class Finding(BaseModel):
    """What one rule concluded about one run."""

    model_config = ConfigDict(frozen=True)

    schema_: str = Field(default=SCHEMA, alias="schema")
    run_id: str
    rule_id: str
    rule_name: str
    family: Family
    severity: Severity
    role: Role = Field(default="cause", description="cause: the root cause; symptom/carrier/noise never outrank a cause")
    precision: Precision = Field(default="high", description="how often the rule is right when it fires")
    rule_version: int = 1
    title: str
    message: str
    remedy: str
    guide: str | None = None
    env_flags: dict[str, str] = Field(default_factory=dict)
    rerun: str | None = Field(default=None, description="copy-paste command that reruns with env_flags")
    evidence: list[Evidence] = Field(default_factory=list)
    fields: dict[str, str] = Field(default_factory=dict)
    fingerprint: str = ""
    primary: bool = False
    ranks: list[int] = Field(default_factory=list, description="ranks of a distributed run the evidence came from "
                             "(empty: not a multi-rank run, or no rank known)")
    first_rank: int | None = Field(default=None, description="of those ranks, the one that failed first (by time "
                                   "stamp, else by position in the log)")

    def to_json(self) -> dict[str, Any]:
        """The JSON-contract dict (``schema`` key, not ``schema_``)."""
        return self.model_dump(mode="json", by_alias=True)
