"""The debugging ladder: the AOTI debugging guide's procedure (aoti-signatures.md section 5), automated.

Each stage reruns the command as a fresh capture under ``<out>/stage-<id>-<name>/`` with more debug variables.
Flags accumulate: a stage keeps the flags of the stages before it (the printer variables excepted), so the checks
of stage 2 stay on while stage 3 makes errors synchronous and stage 4 prints kernels.

====  ==================  ==============================================================================
1     baseline            nothing extra (the capture defaults only)
2     sanity-checks       ``AOTI_RUNTIME_CHECK_INPUTS=1`` ``TORCHINDUCTOR_NAN_ASSERTS=1`` (compile-time: fresh cache)
3     deterministic       CUDA only: ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` ``CUDA_LAUNCH_BLOCKING=1`` (fresh cache)
4a    kernel-names        ``AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3`` (fresh cache): the last kernel launched
4b    kernel-inputs       ``...PRINTER=2`` ``AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT=<that kernel>``: its inputs
====  ==================  ==============================================================================

The ladder stops at the first stage whose analysis is *definite* (:func:`is_definite`), or after stage 1 when
the command succeeded with no error finding; a stage 4a that named a kernel always goes on to 4b. It writes ``<out>/ladder.json``; :meth:`LadderResult.table` is the
summary table.

With ``minify=True`` a last stage, ``5 minify`` (``<out>/stage-5-minify/``), runs :func:`aoti_trace.run.minify.minify`
with the flags of the stage before (``DUMP_AOTI_MINIFIER=1`` added; the printer flags dropped), unless the reported
diagnosis is one the minifier cannot help with; the result is attached to the reported analysis (``.repro``).
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aoti_trace.run.capture import CaptureResult, capture
from aoti_trace.model.vocabulary import CARRIER_FAMILIES

if TYPE_CHECKING:
    from aoti_trace.library.loader import RulesSource
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding
    from aoti_trace.run.minify import MinifyResult

SCHEMA = "aoti-trace.ladder/v1"
PRINTER = "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER"
FILTER = "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT"
CACHE = "TORCHINDUCTOR_CACHE_DIR"

SUCCEEDED = "the command succeeded: nothing to debug"
MINIFY_DIR = "stage-5-minify"



@dataclass(frozen=True)
class Stage:
    """One rung: the variables it adds, and whether it needs a cold compile or a CUDA device."""

    id: str
    name: str
    env: dict[str, str]
    fresh_cache: bool = False
    cuda_only: bool = False

    @property
    def dirname(self) -> str:
        return f"stage-{self.id}-{self.name}"


STAGES: tuple[Stage, ...] = (
    Stage("1", "baseline", {}),
    Stage("2", "sanity-checks", {"AOTI_RUNTIME_CHECK_INPUTS": "1", "TORCHINDUCTOR_NAN_ASSERTS": "1"}, fresh_cache=True),
    Stage("3", "deterministic", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1"}, fresh_cache=True,
          cuda_only=True),
    Stage("4a", "kernel-names", {PRINTER: "3"}, fresh_cache=True),
    Stage("4b", "kernel-inputs", {PRINTER: "2"}, fresh_cache=True),  # + FILTER=<kernel found by 4a>
)


# Every variable some stage sets.
LADDER_VARS = frozenset({FILTER}.union(*(s.env for s in STAGES)))


@dataclass
class StageResult:
    """What one stage ran and showed."""

    stage: Stage
    env: dict[str, str] = field(default_factory=dict)  # variables the ladder added (without the cache dir)
    capture: CaptureResult | None = None
    analysis: Analysis | None = None
    analysis_error: str | None = None
    analysis_crashed: bool = False  # the analysis raised an unexpected exception (a bug in aoti-trace)
    definite: bool = False
    kernel: str | None = None  # 4a: the last kernel launched
    note: str | None = None

    @property
    def skipped(self) -> bool:
        return self.capture is None

    @property
    def primary(self) -> Finding | None:
        return self.analysis.primary if self.analysis is not None else None

    def outcome(self) -> str:
        if self.capture is None:
            return "skipped"
        c = self.capture
        if c.timed_out:
            return "timed out"
        return c.signal if c.signal else f"exit {c.exit_code}"

    def showed(self) -> str:
        if self.capture is None:
            return self.note or ""
        if self.analysis is None:
            text = f"analysis unavailable ({self.analysis_error})"
        elif self.primary is not None:
            text = f"{self.primary.title} [{self.primary.family}]"
            if not self.definite and self.capture is not None:
                text += f" (not definite: {not_definite_because(self.primary, self.capture.env)})"
        else:
            text = "no diagnosis"
        if self.kernel:
            text += f"; last kernel launched: {self.kernel}"
        elif self.primary is not None and self.primary.fields.get("crash_kernel"):
            text += f"; crash kernel: {self.primary.fields['crash_kernel']}"
        if self.primary is not None and self.primary.fields.get("suspicious_input"):
            text += f"; suspicious input: {self.primary.fields['suspicious_input']}"
        if self.note:
            text += f"; {self.note}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage.id,
            "name": self.stage.name,
            "dir": self.stage.dirname if self.capture is not None else None,
            "env": self.env,
            "fresh_cache": self.stage.fresh_cache,
            "outcome": self.outcome(),
            "exit_code": self.capture.exit_code if self.capture else None,
            "signal": self.capture.signal if self.capture else None,
            "timed_out": self.capture.timed_out if self.capture else None,
            "primary": self.primary.to_json() if self.primary is not None else None,
            "definite": self.definite,
            "analysis_error": self.analysis_error,
            "analysis_crashed": self.analysis_crashed,
            "kernel": self.kernel,
            "note": self.note,
        }


@dataclass
class LadderResult:
    out_dir: Path
    command: list[str]
    stages: list[StageResult]
    minify: MinifyResult | None = None  # the optional last stage (``run_ladder(minify=True)``)

    @property
    def decisive(self) -> StageResult | None:
        """The stage whose analysis was definite (where the ladder stopped), if any."""
        return next((s for s in self.stages if s.definite), None)

    @property
    def analysis_crashed(self) -> bool:
        return any(s.analysis_crashed for s in self.stages)

    @property
    def reported(self) -> StageResult:
        """The stage to report: the last definite one (4b after a decisive 4a adds the kernel's inputs), else the
        last stage that ran (it carries the most flags)."""
        ran = [s for s in self.stages if s.capture is not None and s.analysis is not None]
        definite = [s for s in ran if s.definite]
        return (definite or ran or self.stages[:1])[-1]

    def table(self) -> str:
        rows = [("stage", "flags", "outcome", "what it showed")]
        before: dict[str, str] = {}  # the flags of the previous stage that ran: show only what a stage adds
        for s in self.stages:
            added = {k: v for k, v in s.env.items() if before.get(k) != v}
            flags = " ".join(f"{k}={v}" for k, v in added.items()) or "-"
            if s.stage.fresh_cache and not s.skipped:
                flags += " (fresh cache)"
            if not s.skipped and len(added) < len(s.env):
                flags += " + earlier flags"
            if not s.skipped:
                before = s.env
            rows.append((s.stage.dirname.removeprefix("stage-"), flags, s.outcome(), s.showed()))
        if self.minify is not None:
            m = self.minify
            rows.append((MINIFY_DIR.removeprefix("stage-"), "DUMP_AOTI_MINIFIER=1 + earlier flags" if m.captures
                         else "-", m.status.replace("_", " ") if m.captures else "skipped", m.summary()))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len(rows[0][3]))
        d = self.decisive
        if d is not None:
            lines.append(f"\nStopped at stage {d.stage.id} ({d.stage.name}): {d.primary.title}")  # type: ignore[union-attr]
            if self.reported is not d:
                lines[-1] += f"; stage {self.reported.stage.id} ({self.reported.stage.name}) printed that kernel's inputs"
        elif self.stages[0].note == SUCCEEDED:
            lines.append("\nThe command succeeded at the baseline: nothing to debug.")
        else:
            lines.append("\nNo stage gave a definite diagnosis.")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        d = self.decisive
        return {
            "schema": SCHEMA,
            "command": self.command,
            "stopped_at": d.stage.id if d else None,
            "diagnosis": d.primary.to_json() if d and d.primary else None,
            "stages": [s.to_json() for s in self.stages],
            "minify": self.minify.to_json() if self.minify is not None else None,
        }


def is_definite(finding: Finding | None, stage_env: dict[str, str]) -> bool:
    """Whether ``finding`` (a stage's primary finding) names a cause, so the ladder can stop.

    Definite means all of:

    * it exists and has severity ``error``;
    * its family is not a carrier (``segfault``, ``log_damage``: how the process died, not why), and its rule is not
      a generic carrier rule (id ``AOTI-Z...``, or ``generic``/``carrier`` in its name);
    * it is not ``illegal_memory_access`` reported without ``CUDA_LAUNCH_BLOCKING=1`` (the site is asynchronous),
      nor one whose faulting kernel is not named yet (the intermediate value printer of stage 4 names it:
      the ``crash_kernel`` field);
    * every ladder variable (:data:`LADDER_VARS`) the finding asks to rerun with (``env_flags``) is already set in
      this stage: a finding that says "rerun with AOTI_RUNTIME_CHECK_INPUTS=1" reports a symptom, and a later stage
      does just that. Flags the ladder never sets do not hold it back.
    """
    return not_definite_because(finding, stage_env) is None


def not_definite_because(finding: Finding | None, stage_env: dict[str, str]) -> str | None:
    """Why :func:`is_definite` is false for ``finding`` (a few words), or None when it is definite."""
    if finding is None:
        return "no finding"
    if finding.severity != "error":
        return f"severity {finding.severity}"
    if finding.family in CARRIER_FAMILIES:
        return f"{finding.family} says how the process died, not why"
    if finding.rule_id.startswith("AOTI-Z") or re.search(r"generic|carrier", finding.rule_name, re.I):
        return "generic carrier"
    from aoti_trace.engine.failure_rules import is_failure_rule  # a finding exists: the analysis modules import

    if is_failure_rule(finding.rule_id):
        return "no rule explains the failure yet"
    if finding.family == "illegal_memory_access" and stage_env.get("CUDA_LAUNCH_BLOCKING") != "1":
        return "reported asynchronously (no CUDA_LAUNCH_BLOCKING=1)"
    if finding.family == "illegal_memory_access" and "crash_kernel" not in finding.fields:
        return "faulting kernel not named yet"
    missing = [f"{k}={v}" for k, v in finding.env_flags.items() if k in LADDER_VARS and stage_env.get(k) != v]
    if missing:
        return "asks for " + " ".join(missing)
    return None


def analyze_capture(out_dir: Path, rules_path: RulesSource = None) -> tuple[Analysis | None, str | None]:
    """Analyse one capture folder; ``(None, reason)`` when the analysis modules are not available."""
    try:
        from aoti_trace.pipeline import analyze

        return analyze([out_dir], rules_path=rules_path), None
    except ImportError as exc:
        return None, f"{exc}"
    except AttributeError as exc:  # a pipeline module exists but lacks its entry point (not landed yet)
        if isinstance(getattr(exc, "obj", None), types.ModuleType):
            return None, f"{exc}"
        raise


_LAUNCH_RE = re.compile(r"^\[\s*(before|after)_launch:\s*(\S+)\s*\]")


def last_launched_kernel(stdout: str) -> str | None:
    """The kernel launched last with no ``after_launch`` line (printer level 3): where the run died.

    None when no kernel was printed, or when every launch completed.
    """
    open_kernel: str | None = None
    for line in stdout.splitlines():
        m = _LAUNCH_RE.match(line.strip())
        if m:
            open_kernel = m.group(2) if m.group(1) == "before" else None
    return open_kernel


def _kernel_from(result: StageResult) -> str | None:
    if result.analysis is not None:
        df = result.analysis.frames["printer"]
        if df.height and "launched_last" in df.columns:
            hits = df.filter(df["launched_last"].fill_null(False))["kernel"].to_list()
            if hits:
                kernel: str = hits[-1]
                return kernel
    assert result.capture is not None
    try:
        text = (result.capture.out_dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return last_launched_kernel(text)


def has_cuda(result: CaptureResult) -> bool:
    """Whether the capture's environment saw a CUDA device (torch.cuda.is_available() or nvidia-smi -L)."""
    env = result.environment
    return bool(env.get("cuda_available") or env.get("gpus"))


def _error_findings(analysis: Analysis | None) -> bool:
    return analysis is not None and any(f.severity == "error" for f in analysis.findings)


def run_ladder(
    cmd: list[str],
    out_dir: str | Path,
    *,
    logs: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float | None = None,
    echo: bool | str = True,
    cwd: str | Path | None = None,
    rules_path: RulesSource = None,
    progress: Callable[[str], None] | None = None,
    minify: bool = False,
    minify_budget: float | None = None,
) -> LadderResult:
    """Run the ladder for ``cmd`` under ``out_dir``; write ``ladder.json`` and return the result.

    ``progress``: optional callable taking one line of progress text (the CLI prints it on stderr).
    ``minify``: end with stage 5 (the AOTI minifier, at most ``minify_budget`` seconds; see the module docstring).
    Raises :class:`aoti_trace.run.capture.CaptureFailed` when the command cannot be started at all.
    """
    out = Path(out_dir)
    say = progress or (lambda _msg: None)
    ladder = LadderResult(out_dir=out.absolute(), command=list(cmd), stages=[])
    cuda: bool | None = None
    kernel: str | None = None
    stop = False
    carried: dict[str, str] = {}  # flags of the stages before: the ladder escalates, it never drops a check
    for stage in STAGES:
        env = {**carried, **stage.env}
        res = StageResult(stage=stage, env=env)
        ladder.stages.append(res)
        if stop:
            res.note = "not needed"
            continue
        if stage.cuda_only and cuda is False:
            res.note = "skipped: no CUDA device (torch.cuda.is_available() is false and nvidia-smi lists no GPU)"
            continue
        if stage.id == "4b":
            if kernel is None:
                res.note = ("skipped: stage 4a printed no unfinished kernel launch (the printer is a compile-time "
                            "flag: it shows nothing when the command only loads a prebuilt .pt2; or every kernel "
                            "completed)")
                continue
            env[FILTER] = kernel
        if cuda and stage.id.startswith("4"):
            env["CUDA_LAUNCH_BLOCKING"] = "1"  # so the last kernel launched is the one that failed
        run_env = {**(extra_env or {}), **env}
        stage_dir = out / stage.dirname
        if stage.fresh_cache:
            run_env[CACHE] = str((stage_dir / "inductor-cache").absolute())
        say(f"stage {stage.id} ({stage.name}): {' '.join(f'{k}={v}' for k, v in env.items()) or 'no extra flags'}")
        res.capture = capture(cmd, stage_dir, logs=logs, extra_env=run_env, timeout=timeout, echo=echo, cwd=cwd)
        carried.update({k: v for k, v in env.items() if k not in (PRINTER, FILTER)})
        try:
            res.analysis, res.analysis_error = analyze_capture(stage_dir, rules_path)
        except Exception as exc:  # noqa: BLE001 - keep the remaining stages; the CLI reports it as a bug
            res.analysis_error = f"internal error: {type(exc).__name__}: {exc}"
            res.analysis_crashed = True
        if cuda is None:
            cuda = has_cuda(res.capture)
        if stage.id == "4a":
            kernel = res.kernel = _kernel_from(res)
        res.definite = is_definite(res.primary, {**res.capture.env})
        say(f"stage {stage.id}: {res.outcome()}: {res.showed()}")
        if res.definite and not (stage.id == "4a" and kernel):
            stop = True  # (4a that named a kernel goes on to 4b, which prints that kernel's inputs)
        elif stage.id == "1" and res.capture.exit_code == 0 and not res.capture.signal and res.analysis is not None \
                and not _error_findings(res.analysis):
            res.note = SUCCEEDED
            stop = True
    if minify:
        ladder.minify = _minify_stage(ladder, out, carried, minify_budget, extra_env=extra_env, timeout=timeout,
                                      echo=echo, cwd=cwd, rules_path=rules_path, progress=say)
    (out / "ladder.json").write_text(json.dumps(ladder.to_json(), indent=2) + "\n", encoding="utf-8")
    return ladder


def _minify_stage(ladder: LadderResult, out: Path, carried: dict[str, str], budget: float | None, *,
                  extra_env: dict[str, str] | None, timeout: float | None, echo: bool | str,
                  cwd: str | Path | None, rules_path: RulesSource, progress: Callable[[str], None]) -> MinifyResult:
    """Stage 5: minify the reported failure, or say why not; attach the result to the reported analysis."""
    from aoti_trace.run.minify import DEFAULT_BUDGET_S, MinifyResult, cannot_minify, minify

    reported = ladder.reported
    where = (out / MINIFY_DIR).absolute()
    why = SUCCEEDED if ladder.stages[0].note == SUCCEEDED else cannot_minify(reported.primary)
    if why:
        result = MinifyResult(status="nothing_to_minify" if why == SUCCEEDED else "cannot_minify", reason=why,
                              out_dir=where, command=list(ladder.command), target=reported.primary)
        progress(f"stage 5 (minify): skipped: {why}")
    else:
        progress("stage 5 (minify): DUMP_AOTI_MINIFIER=1 + earlier flags")
        env = {**(extra_env or {}), **{k: v for k, v in carried.items() if k not in (PRINTER, FILTER)}}
        result, _ = minify(ladder.command, where, budget_s=budget or DEFAULT_BUDGET_S, timeout=timeout,
                           extra_env=env, echo=echo, cwd=cwd, rules_path=rules_path, progress=progress)
        progress(f"stage 5: {result.summary()}")
    if reported.analysis is not None:
        reported.analysis.repro = result
    return result
