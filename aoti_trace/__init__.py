"""aoti-trace: tells you why an AOTInductor compile, package, load or run failed, and what to do next.

Library API (the CLI is a thin layer over these):

* :func:`analyze` — discover inputs, build frames, apply the rule library, rank findings.
* :func:`discover` — group paths into runs.
* :class:`Analysis`, :class:`Finding`, :class:`Frames`.

Importing this package is cheap: Polars and the rule engine load on first use, and torch is never imported
(``aoti_trace.capture`` is standard-library only so it runs anywhere torch runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Analysis", "Finding", "Frames", "__version__", "analyze", "discover"]

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.pipeline import analyze
    from aoti_trace.discover import discover
    from aoti_trace.model.findings import Finding
    from aoti_trace.model.frames import Frames

_LAZY = {
    "Analysis": "aoti_trace.model.analysis",
    "analyze": "aoti_trace.pipeline",
    "discover": "aoti_trace.discover",
    "Finding": "aoti_trace.model.findings",
    "Frames": "aoti_trace.model.frames",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aoti_trace' has no attribute {name!r}")
