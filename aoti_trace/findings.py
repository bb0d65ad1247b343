"""The finding record: what a rule reports. This is the JSON contract (schema ``aoti-trace.finding/v1``).

A finding is produced by the rule engine (``aoti_trace.engine``) and consumed by every report format.
Exactly one finding of an analysis is ``primary`` whenever any finding has severity ``error``.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "aoti-trace.finding/v1"

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")  # most severe first

# The closed family vocabulary. It is part of the JSON contract: add, never rename.
Family = Literal[
    "triton_index_oob",
    "device_mismatch",
    "constant_loading",
    "deprecated_api",
    "shape_mismatch",
    "dtype_mismatch",
    "dynamic_shape_violation",
    "nan_assert",
    "illegal_memory_access",
    "cpp_compile_error",
    "missing_custom_op",
    "package_error",
    "cuda_version_mismatch",
    "out_of_memory",
    "segfault",
    "lowering_error",
    "export_error",
    "autotune_error",
    "environment",
    "log_damage",
]
FAMILIES: tuple[str, ...] = get_args(Family)


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
    role: Literal["cause", "symptom", "carrier", "noise"] = Field(
        default="cause", description="cause: the root cause; symptom/carrier/noise never outrank a cause")
    precision: str = Field(default="high", description="how often the rule is right when it fires")
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

    def to_json(self) -> dict:
        """The JSON-contract dict (``schema`` key, not ``schema_``)."""
        return self.model_dump(mode="json", by_alias=True)
