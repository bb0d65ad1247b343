"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and other SARIF viewers (a committed interface).

One SARIF run per analysis. Mapping (docs/output.md has the full table):

* ``tool.driver.rules``: one per rule that produced a finding; ``shortDescription`` = title, ``fullDescription``
  = the guide's "What happened" paragraph (else the title), ``help`` = remedy + rerun + guide (text and markdown),
  ``defaultConfiguration.level`` and ``properties.problem.severity`` from the severity, ``properties.tags`` = family.
* ``results``: ``level`` from severity (error -> error, warning -> warning, info -> note); ``message.text`` = the
  rendered message; ``partialFingerprints["aotiTrace/v1"]`` = the finding fingerprint; ``locations[0]`` = the
  place in the repository (:func:`~aoti_trace.report.common.repo_location`: the user's call site when it is inside
  ``source_root``, else the first evidence line inside it, else the user frame or evidence outside it);
  ``relatedLocations`` = every evidence line (the log locations); ``properties`` carries run_id, family, fields,
  env_flags, rerun, primary and guide.
* ``automationDetails.id`` = ``<category>/`` with the category ``aoti-trace`` unless ``category`` is given: stable
  across captures, so that GitHub tracks and closes alerts (the id overrides the upload action's ``category``; the
  property is ``automationDetails``, not ``runAutomationDetails``).

Paths: with ``source_root`` (the CLI passes the working directory), files under it become relative URIs with
``uriBaseId: SRCROOT``, as GitHub needs to annotate repository files; other absolute paths become ``file://`` URIs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aoti_trace import __version__
from aoti_trace.report.common import guide_display, guide_summary, inside, repo_location
from aoti_trace.report.repro import repro_json

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "aotiTrace/v1"
DEFAULT_CATEGORY = "aoti-trace"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "info": "recommendation"}
MAX_DESCRIPTION = 1024  # GitHub's limit for shortDescription / fullDescription


def _clip(text: str, n: int = MAX_DESCRIPTION) -> str:
    text = " ".join(text.split()) if "\n" not in text else text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


def _artifact(path: str, source_root: Path | None) -> dict[str, Any]:
    p = Path(path)
    rel = inside(path, source_root)
    if rel is not None:
        return {"uri": quote(rel), "uriBaseId": "SRCROOT"}
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": quote(p.as_posix())}


def _physical(path: str, line: int | None, source_root: Path | None) -> dict[str, Any]:
    loc: dict[str, Any] = {"artifactLocation": _artifact(path, source_root)}
    if line and line > 0:
        loc["region"] = {"startLine": int(line)}
    return {"physicalLocation": loc}


def _rule(analysis: Analysis, f: Finding) -> dict[str, Any]:
    rerun = f.rerun
    guide = guide_display(analysis, f)
    text = f.remedy.strip()
    md = f.remedy.strip()
    if rerun:
        text += f"\n\nRerun: {rerun}"
        md += f"\n\n**Rerun** to confirm:\n\n```\n{rerun}\n```"
    if guide:
        text += f"\n\nGuide: {guide}"
        md += f"\n\n**Guide:** `{guide}` (`aoti-trace rules show {f.rule_id}`)"
    return {
        "id": f.rule_id,
        "name": f.rule_name,
        "shortDescription": {"text": _clip(f.title)},
        "fullDescription": {"text": _clip(guide_summary(analysis, f) or f.title)},
        "help": {"text": text or f.title, "markdown": md or f.title},
        "defaultConfiguration": {"level": LEVEL[f.severity]},
        "properties": {"tags": ["aoti", f.family], "problem.severity": PROBLEM_SEVERITY[f.severity]},
    }


def _result(analysis: Analysis, f: Finding, index: int, source_root: Path | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.rule_id,
        "ruleIndex": index,
        "level": LEVEL[f.severity],
        "message": {"text": f.message.strip() or f.title},
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint or f"{f.rule_id}:{f.run_id}"},
        "properties": {
            "run_id": f.run_id,
            "family": f.family,
            "primary": f.primary,
            "fields": dict(f.fields),
            "env_flags": dict(f.env_flags),
            "rerun": f.rerun,
            "guide": f.guide,
        },
    }
    loc = repo_location(analysis, f, source_root)
    if loc is not None:
        result["locations"] = [_physical(loc.path, loc.line, source_root)]
        result["properties"]["location_kind"] = loc.kind
        result["properties"]["location_in_repository"] = inside(loc.path, source_root) is not None
    related = []
    for i, ev in enumerate(f.evidence):
        if ev.path and ev.path != "-":
            item = _physical(ev.path, ev.line, source_root)
            item["id"] = i
            item["message"] = {"text": _clip(ev.text, 500) or ev.source}
            related.append(item)
    if related:
        result["relatedLocations"] = related[:10]
    return result


def automation_id(category: str | None = None) -> str:
    """``runs[0].automationDetails.id``: the category (default ``aoti-trace``) with one trailing ``/``."""
    category = (category or DEFAULT_CATEGORY).strip().rstrip("/")
    return f"{category or DEFAULT_CATEGORY}/"


def sarif_document(analysis: Analysis, *, source_root: str | Path | None = None,
                   category: str | None = None) -> dict[str, Any]:
    """The SARIF log as a dict."""
    root = Path(source_root) if source_root is not None else None
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for f in analysis.findings:
        if f.rule_id not in index:
            index[f.rule_id] = len(rules)
            rules.append(_rule(analysis, f))
    results = [_result(analysis, f, index[f.rule_id], root) for f in analysis.findings]
    run_ids = sorted({r.run_id for r in analysis.runs})
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "aoti-trace", "semanticVersion": __version__, "version": __version__,
                            "rules": rules}},
        "automationDetails": {"id": automation_id(category)},
        "invocations": [{"executionSuccessful": True}],
        "results": results,
        "properties": {"runs": run_ids},
    }
    repro = repro_json(analysis)
    if repro is not None:
        run["properties"]["repro"] = repro
    if root is not None:
        run["originalUriBaseIds"] = {"SRCROOT": {"uri": root.resolve().as_uri().rstrip("/") + "/"}}
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render_sarif(analysis: Analysis, *, source_root: str | Path | None = None, category: str | None = None) -> str:
    doc = sarif_document(analysis, source_root=source_root, category=category)
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
