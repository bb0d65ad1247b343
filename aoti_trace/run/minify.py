"""From a diagnosed failure to a minimal repro: drive PyTorch's AOTInductor minifier, then check its result.

PyTorch's AOTI minifier (``torch/_dynamo/repro/aoti.py``, hooked in by ``torch/_inductor/debug.py``
``aot_inductor_minifier_wrapper``): with ``DUMP_AOTI_MINIFIER=1`` a failing ``aoti_compile_and_package`` saves the
exported program and writes ``<debug dir>/minifier/minifier_launcher.py``, and logs ``Writing minified repro to:``
followed by that path on stderr. Running the launcher runs its ``minify`` command: the functorch FX minifier shrinks
the graph, compiling, loading and running each candidate in that one process, writes a checkpoint
``checkpoints/<nodes>.py`` after each step that still fails (``Writing checkpoint with N nodes to PATH``) and copies
the last one to ``repro.py`` in its working folder. A checkpoint runs the repro (``command='run'``) when executed.

:func:`minify` does this with a time limit, then runs the minimal repro under :func:`aoti_trace.run.capture.capture`
and analyses it: the repro *reproduces* the failure when its primary finding has the same rule id and family as
the failure it was made from (the minifier itself only checks that *some* exception is raised). Under ``<out>/``::

    dump/               capture of the command rerun with DUMP_AOTI_MINIFIER=1 (its analysis is the target)
    minify/             capture of the launcher run; its working folder (minifier_launcher.py, repro.py)
    minimal_repro.py    the minimal repro (the last checkpoint), ready to rerun
    verify/             capture of ``python minimal_repro.py``
    torch-debug/        TORCH_COMPILE_DEBUG_DIR of both runs: launcher, checkpoints, saved exported programs
    minify.json         the result (:meth:`MinifyResult.to_json`)

The launcher and the checkpoints pin ``TORCH_TRACE`` and ``TORCH_COMPILE_DEBUG_DIR`` to the run that wrote them
(torch copies every ``TORCH*`` variable into them); the copies aoti-trace runs drop those two assignments, so that
each run is captured in its own folder. Nothing else in them is changed.

When the minifier cannot help, :func:`cannot_minify` says why and nothing more is run: an environment problem, a
missing custom op, a bad package, a failed export, a wrong call (inputs the model was not compiled for: the
minifier replays the exported program with its own example inputs), a segfault while loading a package (the
toolchain), or a CUDA device-side assert / illegal memory access (the CUDA context is unusable afterwards, so the
one-process minifier cannot go on; on an H200 its own dump failed with the same CUDA error).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aoti_trace.library.loader import RulesSource
    import polars as pl

    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding

SCHEMA = "aoti-trace.minify/v1"
DEFAULT_BUDGET_S = 1200.0
DUMP_ENV = {"DUMP_AOTI_MINIFIER": "1"}
DEBUG_DIR_VAR = "TORCH_COMPILE_DEBUG_DIR"
DEBUG_DIR = "torch-debug"  # under <out>: TORCH_COMPILE_DEBUG_DIR of the dump and minify runs
REPRO_NAME = "minimal_repro.py"
# Assignments torch copies into the launcher and the checkpoints that would send a rerun's logs to the old run.
PINNED_VARS = ("TORCH_TRACE", DEBUG_DIR_VAR)

# Families for which a smaller graph tells nothing: why, in one sentence.
NOT_MINIFIABLE: dict[str, str] = {
    "environment": "an environment problem (compiler, shared library, headers, settings) fails every graph the "
                   "same way; fix the environment as the finding says",
    "cuda_version_mismatch": "a CUDA / driver / toolkit mismatch fails every graph the same way; fix the "
                             "environment as the finding says",
    "missing_custom_op": "a custom op is not registered (its library or fake implementation is not loaded); the "
                         "minifier would need it too: load it as the finding says",
    "package_error": "the .pt2 package itself cannot be read or loaded; the graph is not at fault",
    "constant_loading": "the package's constants failed to load; that is a property of the package, not of the "
                        "graph",
    "export_error": "torch.export failed, so there is no exported program to shrink (the AOTI minifier starts "
                    "from one)",
    "shape_mismatch": "the model was called with inputs it was not compiled for; the minifier replays the "
                      "exported program with its own example inputs, so it cannot reproduce a wrong call",
    "dtype_mismatch": "the model was called with inputs it was not compiled for; the minifier replays the "
                      "exported program with its own example inputs, so it cannot reproduce a wrong call",
    "device_mismatch": "the model was called with inputs on another device than it was compiled for; the "
                       "minifier replays the exported program with its own example inputs",
    "dynamic_shape_violation": "an input size is outside the range the model was compiled for; the minifier "
                               "replays the exported program with its own example inputs",
    "out_of_memory": "the device ran out of memory; a smaller graph hides that rather than reproducing it",
}


@dataclass
class MinifyResult:
    """What :func:`minify` did and found. ``status`` is one of :data:`STATUSES`."""

    status: str
    reason: str
    out_dir: Path
    command: list[str]
    target: Finding | None = None  # the failure to reproduce (primary finding of the dump run)
    launcher: Path | None = None
    repro: Path | None = None  # the minimal repro (aoti-trace's clean copy of the last checkpoint)
    nodes_before: int | None = None
    nodes_after: int | None = None
    queries: int | None = None
    minify_s: float | None = None  # how long the minifier ran
    budget_s: float | None = None
    budget_exhausted: bool = False  # stopped by the time limit: the repro is the last checkpoint so far
    verified: Finding | None = None  # primary finding of the repro's own capture
    rerun: str | None = None  # the command that reruns the minimal repro
    captures: dict[str, Path] = field(default_factory=dict)  # step name -> capture folder

    @property
    def reproduced(self) -> bool:
        return self.status == "reproduced"

    def summary(self) -> str:
        """One line for a table or a progress message."""
        if self.repro is not None:
            size = f"{self.nodes_before} -> {self.nodes_after} graph nodes"
            return f"{STATUSES[self.status]}: {size}, {self.repro}" + (f"; {self.reason}" if self.reason else "")
        return f"{STATUSES[self.status]}: {self.reason}"

    def lines(self) -> list[str]:
        """The repro block of a report, as plain lines (label, value)."""
        out = [f"status:  {STATUSES[self.status]}"]
        if self.repro is not None:
            size = f"{self.nodes_before} -> {self.nodes_after} graph nodes" if self.nodes_before is not None else ""
            out.append(f"repro:   {self.repro}" + (f"  ({size})" if size else ""))
        if self.target is not None:
            out.append(f"failure: {self.target.rule_id} {self.target.rule_name} [{self.target.family}]")
        if self.verified is not None and self.status != "reproduced":
            out.append(f"repro's: {self.verified.rule_id} {self.verified.rule_name} [{self.verified.family}]")
        if self.minify_s is not None:
            took = f"minifier: {self.minify_s:.0f} s" + (f" of a {self.budget_s:.0f} s budget" if self.budget_s else "")
            if self.queries is not None:
                took += f", {self.queries} candidates tried"
            out.append(took)
        if self.rerun:
            out.append(f"re-run:  {self.rerun}")
        if self.reason:
            out.append(f"note:    {self.reason}")
        return out

    def to_json(self) -> dict[str, Any]:
        def rule(f: Finding | None) -> dict[str, Any] | None:
            return None if f is None else {"rule_id": f.rule_id, "rule_name": f.rule_name, "family": f.family,
                                           "title": f.title}

        return {
            "schema": SCHEMA,
            "status": self.status,
            "reproduced": self.reproduced,
            "reason": self.reason or None,
            "command": self.command,
            "target": rule(self.target),
            "verified": rule(self.verified),
            "repro": str(self.repro) if self.repro else None,
            "rerun": self.rerun,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "queries": self.queries,
            "minify_s": self.minify_s,
            "budget_s": self.budget_s,
            "budget_exhausted": self.budget_exhausted,
            "launcher": str(self.launcher) if self.launcher else None,
            "captures": {k: str(v) for k, v in self.captures.items()},
        }


STATUSES: dict[str, str] = {
    "reproduced": "minimal repro fails the same way",
    "different_failure": "minimal repro fails, but differently",
    "not_reproduced": "minimal repro does not fail",
    "unverified": "minimal repro fails (nothing to compare it with)",
    "cannot_minify": "the minifier cannot help",
    "nothing_to_minify": "nothing to minify",
    "no_launcher": "no minifier launcher was written",
    "minifier_failed": "the minifier gave no repro",
}


# --------------------------------------------------------------------------- decisions (pure)


def cannot_minify(finding: Finding | None) -> str | None:
    """Why the AOTI minifier cannot help with ``finding`` (a run's primary finding), or None when it may."""
    if finding is None:
        return None
    if finding.family in NOT_MINIFIABLE:
        return f"{finding.family}: {NOT_MINIFIABLE[finding.family]}"
    if finding.family == "segfault" and finding.fields.get("phase") == "load":
        return ("segfault while loading the package: that is usually the toolchain that built it (the C++ "
                "compiler or libstdc++), not the graph, and the minifier replays every candidate in one process, "
                "which the crash would end")
    if finding.family == "illegal_memory_access" or (finding.family == "triton_index_oob"
                                                     and ("CUDA" in finding.title or "GPU" in finding.title)):
        return ("a device-side assert or illegal memory access leaves the CUDA context unusable for the rest of "
                "the process; the minifier compiles and runs every candidate in that one process, and its own dump "
                "of the failing program fails too. Use the ladder's kernel stages (4a/4b) to find the kernel "
                "instead")
    return None


def no_launcher_reason(manifest: dict[str, Any]) -> str:
    """Why a failed dump run (its ``manifest.json``) left no launcher."""
    if manifest.get("timed_out"):
        return "the command timed out before the minifier wrote its launcher"
    if manifest.get("signal"):
        return (f"the command was killed by {manifest['signal']} before the minifier wrote its launcher (it writes it "
                "when aoti_compile_and_package raises; a crash never raises). AOTINDUCTOR_REPRO_LEVEL=3 writes it "
                "before compiling, but the minifier runs every candidate in one process, which a crash ends too")
    return ("the failure did not come from torch._inductor.aoti_compile_and_package, the only call "
            "DUMP_AOTI_MINIFIER hooks (a failure in aoti_load_package of a prebuilt package, in torch.export, in "
            "the deprecated aot_compile, or in your own code is outside it)")


# --------------------------------------------------------------------------- reading the minifier's stderr

_LAUNCHER_RE = r"(?:^|\] )(/.*minifier_launcher\.py)\s*$"
_STARTED_RE = r"^Started off with (\d+) nodes"
_CHECKPOINT_RE = r"Writing checkpoint with (\d+) nodes to (/.*\.py)\s*$"
_QUERIES_RE = r"^Made (\d+) queries"
_COPIED_RE = r"Copying repro file for convenience to (/.*\.py)\s*$"


def _lines(path: Path) -> pl.Series:
    import polars as pl  # lazy: `aoti-trace --help` imports this module

    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        text = ""
    return pl.Series("text", text.splitlines(), dtype=pl.String)


def _last(lines: pl.Series, pattern: str, group: int = 1) -> str | None:
    hits = lines.str.extract(pattern, group).drop_nulls()
    return hits[-1] if hits.len() else None


def launcher_path(stderr: Path) -> Path | None:
    """The launcher a dump run wrote: the last path logged on the line after ``Writing minified repro to:``."""
    found = _last(_lines(stderr), _LAUNCHER_RE)
    return Path(found) if found else None


@dataclass
class MinifierLog:
    """What the minifier's stderr says: sizes, the last checkpoint, the number of candidates tried."""

    nodes_before: int | None
    nodes_after: int | None
    checkpoint: Path | None
    queries: int | None
    finished: bool  # it logged "Copying repro file ... to <cwd>/repro.py" after "Made N queries"


def read_minifier_log(stderr: Path) -> MinifierLog:
    lines = _lines(stderr)
    before = _last(lines, _STARTED_RE)
    after = _last(lines, _CHECKPOINT_RE, 1)
    checkpoint = _last(lines, _CHECKPOINT_RE, 2)
    queries = _last(lines, _QUERIES_RE)
    return MinifierLog(
        nodes_before=int(before) if before else None,
        nodes_after=int(after) if after else None,
        checkpoint=Path(checkpoint) if checkpoint else None,
        queries=int(queries) if queries else None,
        finished=queries is not None and _last(lines, _COPIED_RE) is not None,
    )


def unpinned(source: str) -> str:
    """``source`` without the ``os.environ['TORCH_TRACE'] = ...`` / ``TORCH_COMPILE_DEBUG_DIR`` lines torch wrote."""
    prefixes = tuple(f"os.environ['{name}'] = " for name in PINNED_VARS)
    return "".join(line for line in source.splitlines(keepends=True) if not line.startswith(prefixes))


# --------------------------------------------------------------------------- assessing an output folder


def _analyze(folder: Path, rules_path: RulesSource) -> Analysis | None:
    from aoti_trace.run.ladder import analyze_capture

    analysis, _why = analyze_capture(folder, rules_path)
    return analysis


def _error_primary(analysis: Analysis | None) -> Finding | None:
    p = analysis.primary if analysis is not None else None
    return p if p is not None and p.severity == "error" else None


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        manifest: dict[str, Any] = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        return manifest
    except (OSError, ValueError):
        return None


def _ended(m: dict[str, Any]) -> str:
    if m.get("timed_out"):
        return f"timed out after {m.get('duration_s')} s"
    return f"killed by {m['signal']}" if m.get("signal") else f"exit code {m.get('exit_code')}"


def assess(out_dir: str | Path, *, rules_path: RulesSource = None, budget_s: float | None = None,
           command: list[str] | None = None) -> tuple[MinifyResult, Analysis | None]:
    """Read a :func:`minify` output folder (as far as its steps got) into a result; runs nothing.

    Returns the result and the dump run's analysis (the diagnosis of the original failure), with the result
    attached as ``analysis.repro``. :func:`minify` calls it after each step to decide whether to go on.
    """
    out = Path(out_dir).absolute()
    dump = _manifest(out / "dump")
    if dump is None:
        raise FileNotFoundError(f"{out / 'dump'} holds no capture (manifest.json)")
    res = MinifyResult(status="nothing_to_minify", reason="", out_dir=out, command=command or dump["command"],
                       budget_s=budget_s, captures={"dump": out / "dump"})
    analysis = _analyze(out / "dump", rules_path)
    if analysis is not None:
        analysis.repro = res
    res.target = _error_primary(analysis)
    failed = dump.get("exit_code") != 0 or dump.get("signal") or dump.get("timed_out")
    if res.target is None and not failed:
        res.reason = "the command succeeded and aoti-trace found no error"
        return res, analysis
    why = cannot_minify(res.target)
    if why:
        res.status, res.reason = "cannot_minify", why
        return res, analysis
    res.launcher = launcher_path(out / "dump" / "stderr.txt")
    if res.launcher is None:
        res.status, res.reason = "no_launcher", no_launcher_reason(dump)
        return res, analysis

    run = _manifest(out / "minify")
    if run is None:  # not run (yet)
        res.status, res.reason = "minifier_failed", "the minifier has not run"
        return res, analysis
    res.captures["minify"] = out / "minify"
    log = read_minifier_log(out / "minify" / "stderr.txt")
    res.nodes_before, res.nodes_after, res.queries = log.nodes_before, log.nodes_after, log.queries
    res.minify_s = run.get("duration_s")
    res.budget_exhausted = bool(run.get("timed_out"))
    if log.checkpoint is None:
        res.status = "minifier_failed"
        res.reason = (f"the minifier ended ({_ended(run)}) before it wrote a checkpoint; see "
                      f"{out / 'minify' / 'stderr.txt'}")
        return res, analysis
    if not log.finished:
        res.reason = ("the minifier was stopped by its time budget; the repro is its last checkpoint"
                      if res.budget_exhausted else f"the minifier did not finish ({_ended(run)}); the repro is its "
                                                   "last checkpoint")
    repro = out / REPRO_NAME
    verify = _manifest(out / "verify")
    if verify is None:
        res.status = "minifier_failed"
        res.reason = _join(res.reason, f"no minimal repro was run ({repro} missing or not verified)")
        return res, analysis
    res.repro = repro
    res.rerun = shlex.join(verify["command"])
    res.captures["verify"] = out / "verify"
    res.verified = _error_primary(_analyze(out / "verify", rules_path))
    res.status, why = verdict(res.target, res.verified, _ended(verify))
    res.reason = _join(res.reason, why)
    return res, analysis


def verdict(target: Finding | None, verified: Finding | None, ended: str = "") -> tuple[str, str]:
    """``(status, reason)``: does the repro's primary finding match the original one (rule id and family)?"""
    if verified is None:
        return "not_reproduced", f"the repro ran ({ended}) and aoti-trace found no error in it"
    if target is None:
        return "unverified", "aoti-trace had no diagnosis of the original failure to compare with"
    if (verified.rule_id, verified.family) == (target.rule_id, target.family):
        if target.role != "cause":
            return "reproduced", (f"{target.rule_id} is a generic {target.role} rule: compare the two messages to "
                                  "be sure it is the same failure")
        return "reproduced", ""
    return "different_failure", (f"the repro fails with {verified.rule_id} [{verified.family}], not with "
                                 f"{target.rule_id} [{target.family}]")


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a and b else a or b


# --------------------------------------------------------------------------- the driver


def minify(
    cmd: list[str],
    out_dir: str | Path,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    timeout: float | None = None,
    extra_env: dict[str, str] | None = None,
    echo: bool | str = False,
    cwd: str | Path | None = None,
    rules_path: RulesSource = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[MinifyResult, Analysis | None]:
    """Rerun ``cmd`` with the minifier dump on, minify within ``budget_s`` seconds, verify the repro.

    Returns :func:`assess` of the output folder (also written to ``<out>/minify.json``). ``timeout`` limits the
    dump and the verify runs (not the minifier). Raises :class:`aoti_trace.run.capture.CaptureFailed` when the
    command cannot be started at all.
    """
    from aoti_trace.run.capture import capture, python_of  # here: `analyze` imports this module for its schema
    say = progress or (lambda _msg: None)
    out = Path(out_dir).absolute()
    env = {**(extra_env or {}), DEBUG_DIR_VAR: str(out / DEBUG_DIR)}

    say(f"dump run: {' '.join(f'{k}={v}' for k, v in DUMP_ENV.items())} {shlex.join(cmd)}")
    dump = capture(cmd, out / "dump", extra_env={**env, **DUMP_ENV}, timeout=timeout, echo=echo, cwd=cwd)
    res, analysis = assess(out, rules_path=rules_path, budget_s=budget_s, command=cmd)
    t = res.target
    say(f"dump run: {dump.describe()}: " + (f"{t.rule_id} {t.title} [{t.family}]" if t else "no error finding"))
    if res.launcher is None or not res.launcher.is_file():
        if res.launcher is not None:
            res.status, res.reason = "no_launcher", f"the launcher the command logged, {res.launcher}, does not exist"
        return _done(res, analysis)

    work = out / "minify"
    work.mkdir(parents=True, exist_ok=True)
    launcher = work / "minifier_launcher.py"
    launcher.write_text(unpinned(res.launcher.read_text(encoding="utf-8")), encoding="utf-8")
    python = cmd[0] if python_of(cmd, None) == shutil.which(cmd[0]) else sys.executable  # the command's own python
    say(f"minifier: {python} {launcher} (budget {budget_s:g} s)")
    run = capture([python, str(launcher)], work, extra_env=env, timeout=budget_s, echo=echo, cwd=work)
    log = read_minifier_log(work / "stderr.txt")
    say(f"minifier: {run.describe()}: {log.nodes_before} -> {log.nodes_after} graph nodes"
        + (f", {log.queries} candidates tried" if log.queries is not None else ""))
    if log.checkpoint is None or not log.checkpoint.is_file():
        return _done(*assess(out, rules_path=rules_path, budget_s=budget_s, command=cmd))

    repro = out / REPRO_NAME
    repro.write_text(repro_source(log.checkpoint), encoding="utf-8")
    say(f"verify: {shlex.join([python, str(repro)])}")
    verify = capture([python, str(repro)], out / "verify", extra_env=env, timeout=timeout, echo=echo, cwd=out)
    res, analysis = assess(out, rules_path=rules_path, budget_s=budget_s, command=cmd)
    say(f"verify: {verify.describe()}: {STATUSES[res.status]}")
    return _done(res, analysis)


def repro_source(checkpoint: Path) -> str:
    """The minimal repro: the checkpoint's source, unpinned, under a header that says where it came from."""
    header = (f"# Minimal repro written by PyTorch's AOTI minifier ({checkpoint}); aoti-trace dropped the\n"
              f"# lines that pinned {' and '.join(PINNED_VARS)} to the minifier's own run.\n")
    return header + unpinned(checkpoint.read_text(encoding="utf-8"))


def _done(res: MinifyResult, analysis: Analysis | None) -> tuple[MinifyResult, Analysis | None]:
    (res.out_dir / "minify.json").write_text(json.dumps(res.to_json(), indent=2) + "\n", encoding="utf-8")
    return res, analysis
