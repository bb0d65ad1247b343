"""``--format json`` and ``jsonl``: the versioned machine-readable contract.

``json`` is one document ``{"schema", "tool", "version", "runs", "findings", "summary"}``; ``jsonl`` is one
finding record per line (the summary is not included). Consumers must ignore unknown fields.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aoti_trace import __version__
from aoti_trace.model.vocabulary import SEVERITIES
from aoti_trace.report.repro import REPRO_SCHEMA, repro_json

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis

DOCUMENT_SCHEMA = "aoti-trace.report/v1"
# where the committed schema file is published (docs/schemas/ of the repository named in pyproject's [project.urls])
SCHEMA_FILE = "docs/schemas/aoti-trace.report-v1.schema.json"
SCHEMA_ID = "https://raw.githubusercontent.com/aoti-trace/aoti-trace/main/" + SCHEMA_FILE


SESSION_KEYS = ("rank", "session", "kind", "api", "status", "fail_type", "duration_s", "user_frame", "path")


def run_summaries(analysis: Analysis) -> list[dict[str, Any]]:
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
        if not versions and proc.get("torch"):  # a load/run-only capture: the manifest knows the torch version
            versions = [proc["torch"]]
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
    repro = repro_json(analysis)
    if repro is not None:
        doc["repro"] = repro
    return json.dumps(doc, indent=2) + "\n"


def render_jsonl(analysis: Analysis) -> str:
    return "".join(json.dumps(f.to_json()) + "\n" for f in analysis.findings)


# ------------------------------------------------------------------------------------------- JSON Schema
def _nullable(t: str | list[str]) -> dict[str, Any]:
    types = [t] if isinstance(t, str) else list(t)
    return {"type": [*types, "null"]}


_STR_LIST = {"type": "array", "items": {"type": "string"}}
RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run_id", "inputs", "command", "exit_code", "signal", "timed_out", "duration_s", "torch_versions",
                 "compile_devices", "ranks", "compile_sessions", "damage"],
    "properties": {
        "run_id": {"type": "string", "description": "the analysed process or capture"},
        "inputs": {
            "type": "object",
            "additionalProperties": False,
            "required": ["trace_files", "stderr", "stdout", "manifest", "packages"],
            "properties": {"trace_files": _STR_LIST, "stderr": _STR_LIST, "stdout": _STR_LIST,
                           "manifest": _nullable("string"), "packages": _STR_LIST},
        },
        "command": {**_nullable("string"), "description": "command line of a captured run"},
        "exit_code": {**_nullable("integer"), "description": "exit status (negative: killed by that signal)"},
        "signal": {**_nullable("string"), "description": "SIGSEGV, ... when killed by a signal"},
        "timed_out": {"type": "boolean"},
        "duration_s": {**_nullable("number"), "description": "wall time of the captured run"},
        "torch_versions": _STR_LIST,
        "compile_devices": {**_STR_LIST, "description": "AOTI_DEVICE_KEY values of the compiles (cpu, cuda, ...)"},
        "ranks": {"type": "array", "items": {"type": "integer"}},
        "compile_sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": list(SESSION_KEYS),
                "properties": {
                    "rank": _nullable("integer"), "session": _nullable("integer"), "kind": _nullable("string"),
                    "api": _nullable("string"),
                    "status": {"enum": ["ok", "failed", "incomplete", None]},
                    "fail_type": _nullable("string"), "duration_s": _nullable("number"),
                    "user_frame": _nullable("string"), "path": _nullable("string"),
                },
            },
        },
        "damage": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "lineno", "kind", "count", "detail"],
                "properties": {"path": _nullable("string"), "lineno": _nullable("integer"), "kind": {"type": "string"},
                               "count": _nullable("integer"), "detail": _nullable("string")},
            },
        },
    },
}


def finding_schema() -> dict[str, Any]:
    """JSON Schema of one finding record (``aoti-trace.finding/v1``, one line of ``jsonl``), from the pydantic model
    derived from the dataclass."""
    from pydantic import ConfigDict

    from aoti_trace.model.derive import derive
    from aoti_trace.model.findings import Evidence, Finding

    frozen = ConfigDict(frozen=True)
    model = derive(Finding, __name__, frozen, {Evidence: derive(Evidence, __name__, frozen)})
    return model.model_json_schema(by_alias=True, mode="serialization")


def document_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the ``--format json`` document (``aoti-trace.report/v1``)."""
    finding = finding_schema()
    defs = finding.pop("$defs", {})
    defs["Finding"] = finding
    defs["Run"] = RUN_SCHEMA
    defs["Repro"] = REPRO_SCHEMA
    counts = {"type": "object", "additionalProperties": False, "required": list(SEVERITIES),
              "properties": {s: {"type": "integer", "minimum": 0} for s in SEVERITIES}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "aoti-trace report document",
        "type": "object",
        "additionalProperties": False,
        "required": ["schema", "tool", "version", "runs", "findings", "summary"],
        "properties": {
            "schema": {"const": DOCUMENT_SCHEMA},
            "tool": {"const": "aoti-trace"},
            "version": {"type": "string"},
            "runs": {"type": "array", "items": {"$ref": "#/$defs/Run"}},
            "findings": {"type": "array", "items": {"$ref": "#/$defs/Finding"}},
            "repro": {"$ref": "#/$defs/Repro"},
            "summary": {
                "type": "object",
                "additionalProperties": False,
                "required": ["counts", "primary", "primary_family"],
                "properties": {"counts": counts, "primary": _nullable("string"),
                               "primary_family": _nullable("string")},
            },
        },
        "$defs": defs,
    }


def schema_text() -> str:
    """The committed schema file's text (``docs/schemas/aoti-trace.report-v1.schema.json``)."""
    return json.dumps(document_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m aoti_trace.report.json: print the document's JSON Schema
    print(schema_text(), end="")
