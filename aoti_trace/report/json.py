"""``--format json`` and ``jsonl``: the versioned machine-readable contract.

``json`` is one document ``{"schema", "tool", "version", "runs", "findings", "summary"}``; ``jsonl`` is one
finding record per line (the summary is not included). Consumers must ignore unknown fields.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aoti_trace import __version__
from aoti_trace.findings import SEVERITIES

if TYPE_CHECKING:
    from aoti_trace.analysis import Analysis

DOCUMENT_SCHEMA = "aoti-trace.report/v1"


def run_summaries(analysis: Analysis) -> list[dict]:
    """Per-run metadata: inputs, torch version, compile device, sessions, exit status, damage."""
    frames = analysis.frames
    out = []
    for run in analysis.runs:
        rid = run.run_id
        compiles = frames["compiles"].filter(frames["compiles"]["run_id"] == rid)
        process = frames["process"].filter(frames["process"]["run_id"] == rid)
        damage = frames["damage"].filter(frames["damage"]["run_id"] == rid)
        versions = [v for v in compiles["pytorch_version"].drop_nulls().unique().to_list()]
        devices = [v for v in compiles["device_key"].drop_nulls().unique().to_list()]
        out.append(
            {
                "run_id": rid,
                "inputs": {
                    "trace_files": [str(p) for p in run.trace_files],
                    "stderr": [str(p) for p in run.stderr],
                    "stdout": [str(p) for p in run.stdout],
                    "manifest": str(run.manifest) if run.manifest else None,
                    "packages": [str(p) for p in run.packages],
                },
                "torch_versions": sorted(versions),
                "compile_devices": sorted(devices),
                "compile_sessions": [
                    {k: row[k] for k in ("session", "kind", "api", "status", "fail_type", "duration_s")}
                    for row in compiles.iter_rows(named=True)
                ],
                "exit_code": process["exit_code"][0] if process.height else None,
                "signal": process["signal"][0] if process.height else None,
                "damage": [
                    {k: row[k] for k in ("path", "lineno", "kind", "count", "detail")}
                    for row in damage.iter_rows(named=True)
                ],
            }
        )
    return out


def render_json(analysis: Analysis) -> str:
    counts = {s: sum(f.severity == s for f in analysis.findings) for s in SEVERITIES}
    primary = analysis.primary
    doc = {
        "schema": DOCUMENT_SCHEMA,
        "tool": "aoti-trace",
        "version": __version__,
        "runs": run_summaries(analysis),
        "findings": [f.to_json() for f in analysis.findings],
        "summary": {"counts": counts, "primary": primary.rule_id if primary else None,
                    "primary_family": primary.family if primary else None},
    }
    return json.dumps(doc, indent=2) + "\n"


def render_jsonl(analysis: Analysis) -> str:
    return "".join(json.dumps(f.to_json()) + "\n" for f in analysis.findings)
