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


SESSION_KEYS = ("rank", "session", "kind", "api", "status", "fail_type", "duration_s", "user_frame", "path")


def run_summaries(analysis: Analysis) -> list[dict]:
    """Per-run metadata: inputs, command, exit status, duration, torch version, compile device, compile sessions,
    ranks and log damage (see docs/output.md)."""
    frames = analysis.frames
    out = []
    for run in analysis.runs:
        rid = run.run_id
        compiles = frames["compiles"].filter(frames["compiles"]["run_id"] == rid)
        process = frames["process"].filter(frames["process"]["run_id"] == rid)
        damage = frames["damage"].filter(frames["damage"]["run_id"] == rid)
        events = frames["events"].filter(frames["events"]["run_id"] == rid)
        proc = process.row(0, named=True) if process.height else {}
        versions = compiles["pytorch_version"].drop_nulls().unique().to_list()
        devices = [v for v in compiles["device_key"].drop_nulls().unique().to_list() if v]
        ranks = set(events["rank"].drop_nulls().unique().to_list()) | set(compiles["rank"].drop_nulls().to_list())
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
                "command": proc.get("command"),
                "exit_code": proc.get("exit_code"),
                "signal": proc.get("signal"),
                "timed_out": bool(proc.get("timed_out")),
                "duration_s": proc.get("duration_s"),
                "torch_versions": sorted(versions),
                "compile_devices": sorted(devices),
                "ranks": sorted(ranks),
                "compile_sessions": [{k: row[k] for k in SESSION_KEYS} for row in compiles.iter_rows(named=True)],
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
