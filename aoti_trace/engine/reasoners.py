"""Reasoners: computed, cross-source enrichment of findings that a YAML match tree cannot express.

After a rule has matched and its finding is built, :func:`enrich` runs every reasoner registered for the
finding's family. A reasoner takes ``(finding, frames)`` and returns a (possibly) updated finding: extra
``fields``, ``evidence`` items, ``env_flags`` or a sentence appended to the ``message``. Reasoners never create
or drop findings and never change the fingerprint (computed before enrichment from the rule's own captures).
They read frames only through :mod:`aoti_trace.engine.compile` helpers.

Registered:

* ``illegal_memory_access`` -> :func:`launch_blocking`: without ``CUDA_LAUNCH_BLOCKING=1`` in the run's
  environment (``process.env``) the reported location is possibly misplaced.
* ``segfault`` -> :func:`crash_phase`: where did it happen (``faults.phase``, else the compile status).

Still to add when CUDA fixtures land: a ``triton_index_oob`` reasoner that maps a device assert's
``kernel_file``/``kernel_line`` to the kernel name and its source nodes via the wrapper code in the trace
(``artifacts``) or the package (``package`` frame).
"""

from __future__ import annotations

from typing import Callable

from aoti_trace.engine import compile as C
from aoti_trace.findings import Evidence, Finding
from aoti_trace.frames import Frames

Reasoner = Callable[[Finding, Frames], Finding]
REASONERS: dict[str, list[Reasoner]] = {}


def reasoner(*families: str) -> Callable[[Reasoner], Reasoner]:
    """Register a reasoner for findings of ``families``."""

    def deco(fn: Reasoner) -> Reasoner:
        for fam in families:
            REASONERS.setdefault(fam, []).append(fn)
        return fn

    return deco


def enrich(finding: Finding, frames: Frames) -> Finding:
    for fn in REASONERS.get(finding.family, []):
        finding = fn(finding, frames)
    return finding


def parse_env(text: str | None) -> dict[str, str]:
    """``process.env`` ('K=V' space-separated) as a dict."""
    out: dict[str, str] = {}
    for item in (text or "").split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def _add(finding: Finding, *, fields: dict[str, str] | None = None, env: dict[str, str] | None = None,
         note: str | None = None, evidence: list[Evidence] | None = None) -> Finding:
    update: dict = {}
    if fields:
        update["fields"] = {**finding.fields, **fields}
    if env:
        update["env_flags"] = {**finding.env_flags, **env}
    if note:
        update["message"] = f"{finding.message} ({note})"
    if evidence:
        update["evidence"] = (list(finding.evidence) + evidence)[:4]
    return finding.model_copy(update=update)


@reasoner("illegal_memory_access")
def launch_blocking(finding: Finding, frames: Frames) -> Finding:
    """CUDA errors are reported asynchronously: unless the run set CUDA_LAUNCH_BLOCKING=1, the location is unsure."""
    procs = C.run_rows(frames, "process", finding.run_id, ["env"])
    known = [p["env"] for p in procs if p.get("env") is not None]
    value = parse_env(known[0]).get("CUDA_LAUNCH_BLOCKING") if known else None
    if value == "1":
        return _add(finding, fields={"launch_blocking": "1"})
    state = "unknown" if not known else ("unset" if value is None else value)
    return _add(
        finding,
        fields={"launch_blocking": state},
        env={"CUDA_LAUNCH_BLOCKING": "1"},
        note="location possibly misplaced: CUDA reports errors asynchronously; rerun with CUDA_LAUNCH_BLOCKING=1",
    )


@reasoner("segfault")
def crash_phase(finding: Finding, frames: Frames) -> Finding:
    """Where the process died: the fault's inferred phase, else the compile status of the run."""
    faults = C.run_rows(frames, "faults", finding.run_id, ["path", "lineno", "phase", "user_file", "user_line"])
    phase = next((f["phase"] for f in faults if f.get("phase") not in (None, "unknown")), None)
    source = "faults.phase" if phase else None
    if phase is None:
        statuses = [c["status"] for c in C.run_rows(frames, "compiles", finding.run_id, ["status"])]
        if "incomplete" in statuses:
            phase, source = "compile", "compiles.status=incomplete"
        elif statuses and all(s == "ok" for s in statuses):
            phase, source = "load or run", "all compiles ok"
    evidence = []
    user = next((f for f in faults if f.get("user_file")), None)
    if user is not None:
        evidence.append(Evidence(source="faults", path=user.get("path"), line=user.get("lineno"),
                                 text=f"in user code {user['user_file']}:{user.get('user_line')}"))
    return _add(
        finding,
        fields={"phase": phase or "unknown", "phase_source": source or "none"},
        note=f"during {phase}" if phase else None,
        evidence=evidence,
    )
