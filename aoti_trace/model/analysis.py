"""The result of an analysis: the runs, their frames, the ranked findings and the guides of their rules.

:func:`aoti_trace.pipeline.analyze` makes it; the reports (:mod:`aoti_trace.report`) render it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from aoti_trace.model.findings import Finding
from aoti_trace.model.frames import Frames

if TYPE_CHECKING:
    from aoti_trace.discover import RunInputs
    from aoti_trace.run.minify import MinifyResult


@dataclass(frozen=True)
class Guide:
    """A rule's guide (``rules/guides/<family>/<name>.md``), read when the analysis was made."""

    path: Path
    text: str


@dataclass
class Analysis:
    """Result of one analysis: the runs, their frames, the ranked findings and the guides of their rules."""

    runs: list[RunInputs]
    frames: Frames
    findings: list[Finding] = field(default_factory=list)
    guides: dict[str, Guide] = field(default_factory=dict)  # rule id -> its guide (from the rule's own folder)
    repro: MinifyResult | None = None  # a minimal repro of the primary failure (set by aoti_trace.run.minify)

    @property
    def primary(self) -> Finding | None:
        """The root-cause finding, if any finding has severity error."""
        return next((f for f in self.findings if f.primary), None)

    def _repr_html_(self) -> str:
        """Jupyter's display of ``aoti_trace.analyze(path)``: the HTML report's summary."""
        from aoti_trace.report.html import summary_html

        return summary_html(self)
