"""The analysis pipeline: inputs -> frames -> findings (its result, :class:`~aoti_trace.model.analysis.Analysis`).

``analyze()`` is what ``aoti-trace analyze`` and ``aoti-trace run`` call. Each step lives in its own module:
:mod:`aoti_trace.discover` (inputs), :mod:`aoti_trace.ingest` (frames), :mod:`aoti_trace.engine` (findings),
:mod:`aoti_trace.report` (output).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from aoti_trace.discover import RunInputs, discover
from aoti_trace.model.analysis import Analysis, Guide
from aoti_trace.model.findings import Finding
from aoti_trace.model.frames import Frames, conform, schema

if TYPE_CHECKING:
    from aoti_trace.library.loader import RulesSource
    from aoti_trace.engine.ruleset import RuleSet
    from aoti_trace.run.host import HostInfo


def build_frames(runs: list[RunInputs], *, this_host: bool = False, processes: int | None = None) -> Frames:
    """Parse every input of every run into one set of frames keyed by ``run_id``.

    A run's packages are compared with the machine the run loaded them on (its capture manifest), or with this
    machine when ``this_host`` (:func:`aoti_trace.ingest.package.reader.package_frames`). Frames read from files that these
    point at (generated code, chromium events, the user's source) are derived on
    first use (:func:`derive_file_frames`). Each frame is concatenated once at the end (appending input by input costs time quadratic in the number of
    inputs); the trace files are read in parallel when there are many (:mod:`aoti_trace.ingest.parallel`), on ``processes``
    worker processes (default: one per core; ``1``: in this process); the lines of all captured streams are
    classified in one pass (:func:`aoti_trace.ingest.text.reader.read_streams`).
    """
    from aoti_trace.ingest import divergence, process
    from aoti_trace.ingest.text import failure, reader as text
    from aoti_trace.ingest.parallel import read_traces

    frames = _Parts()
    traces = read_traces([(run.trace_files, run.run_id) for run in runs if run.trace_files and not run.is_empty()],
                         processes)
    # every captured stream at once: their lines are classified in one pass (aoti_trace.ingest.text.read_streams)
    streams = iter(text.read_streams([(path, stream, run.run_id) for run in runs if not run.is_empty()
                                      for stream, paths in (("stderr", run.stderr), ("stdout", run.stdout))
                                      for path in paths]))
    for run in runs:
        if run.skipped:  # found by discovery but not read: a FIFO, an unreadable file, a link out of the folder
            frames.add("damage", pl.DataFrame([
                {"run_id": run.run_id, "path": str(s.path), "lineno": None, "kind": s.kind, "count": 1,
                 "detail": s.detail} for s in run.skipped], schema=schema("damage")))
        if run.is_empty():
            where = run.root if run.root is not None else run.run_id
            frames.add("damage", pl.DataFrame([{
                "run_id": run.run_id, "path": str(where), "lineno": None, "kind": "no_inputs", "count": 1,
                "detail": f"nothing to analyse under {where}: no TORCH_TRACE log, stderr/stdout file, manifest, "
                          "exit-code file or .pt2 package",
            }]))
            continue
        if run.trace_files:
            frames.merge(next(traces))
        for paths in (run.stderr, run.stdout):
            for _ in paths:
                frames.merge(next(streams))
        frames.merge(process.read_process(run))
        if run.packages:
            from aoti_trace.ingest.package import reader as package  # only when there is a package (a costly import)

            host, source = _package_host(run, this_host)
            for pkg in run.packages:
                frames.merge(package.package_frames(pkg, run.run_id, host, source))
    out = frames.frames()
    out.add("failures", failure.failures_frame(out))
    out.add("divergence", divergence.divergence_frame(out))
    derive_file_frames(out)
    return out


def _package_host(run: RunInputs, this_host: bool) -> tuple[HostInfo | None, str]:
    """The machine to compare a run's packages with: this one when asked, else the one its manifest describes."""
    from aoti_trace.run import host
    from aoti_trace.ingest import process

    if this_host:
        return host.host_info(), "this machine"
    env = process.manifest_environment(run)
    return (host.from_environment(env), "manifest") if env else (None, "manifest")


def derive_file_frames(frames: Frames) -> None:
    """Register the frames read from files that the other frames point at, computed on first use: generated code
    (``code``, ``generated``), chromium events (``chromium``) and the user's call sites (``sources``)."""
    from aoti_trace.ingest.trace import chromium
    from aoti_trace.ingest import code, sources

    frames.derive("code", code.code_frame)
    frames.derive("generated", code.generated_frame)
    frames.derive("chromium", chromium.chromium_frame)
    frames.derive("sources", sources.sources_frame)


class _Parts:
    """Frames collected input by input and concatenated once (same interface as :class:`Frames` for adding)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[pl.DataFrame]] = {}

    def add(self, name: str, df: pl.DataFrame) -> None:
        self.parts.setdefault(name, []).append(conform(name, df))

    def merge(self, other: Frames) -> None:
        for name, df in other.tables.items():
            self.parts.setdefault(name, []).append(df)

    def frames(self) -> Frames:
        return Frames({name: dfs[0] if len(dfs) == 1 else pl.concat(dfs, how="diagonal_relaxed")
                       for name, dfs in self.parts.items()})


def analyze(
    paths: list[str | Path],
    *,
    stderr: str | Path | None = None,
    stdout: str | Path | None = None,
    exit_code: str | None = None,
    rules_path: RulesSource = None,
    this_host: bool = False,
) -> Analysis:
    """Analyse the given inputs with the rule library (or the rules under ``rules_path``). ``this_host``: compare
    packages with this machine (as if loading them here) instead of the machine their capture ran on."""
    from aoti_trace import engine, library

    runs = discover(paths, stderr=stderr, stdout=stdout, exit_code=exit_code)
    frames = build_frames(runs, this_host=this_host)
    rules = library.load_rules(rules_path)
    findings = engine.evaluate(rules, frames)
    if len(runs) > 1:  # per-rank captures of one launch: collective failures across them (aoti_trace.engine.consequences)
        from aoti_trace.engine import consequences

        findings = consequences.mark(findings, job=consequences.job_of(runs, frames))
    return Analysis(runs=runs, frames=frames, findings=findings, guides=read_guides(findings, rules))


def read_guides(findings: list[Finding], rules: RuleSet) -> dict[str, Guide]:
    """The guide of each finding's rule, found in the folder the rule was loaded from (``--rules DIR`` too); the
    built-in failure rules' guides are in the built-in library. A guide that cannot be read is left out."""
    from aoti_trace.library.loader import default_rules_dir
    from aoti_trace.model.errors import RuleError

    out: dict[str, Guide] = {}
    for f in findings:
        if not f.guide or f.rule_id in out:
            continue
        rule = rules.get(f.rule_id)
        path = rules.guide_path(rule) if rule is not None else None
        if path is None or not path.is_file():
            try:
                path = default_rules_dir() / f.guide
            except RuleError:  # no built-in library (an unusual install): no guide, not a failure
                continue
        try:
            out[f.rule_id] = Guide(path=path, text=path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return out
