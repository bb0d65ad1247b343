"""Find the inputs of an analysis and group them into runs.

A *run* is one analysed process (or capture). Inputs are discovered from the paths the user gives:

* a TORCH_TRACE folder or a single trace file (``dedicated_log_torch_trace*.log``, optionally ``.gz``);
* a capture folder written by ``aoti-trace run`` (``manifest.json``, ``stdout.txt``, ``stderr.txt``, ``trace/``);
* a ``.pt2`` package;
* any folder: trace logs anywhere below, files named ``stderr*`` / ``stdout*`` (``.txt``, ``.log``),
  ``manifest.json`` / ``exit_code`` files and ``.pt2`` packages are collected.

Every folder that holds a manifest, an exit-code file or a stderr/stdout file is a run; trace logs and packages
belong to the nearest such folder above them. Whatever is left forms one run per given path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from aoti_trace.errors import InputError

TRACE_RE = re.compile(r"^dedicated_log_torch_trace.*\.log(?:\.gz)?$")
STREAM_RE = re.compile(r"^(?P<stream>stderr|stdout)[\w.-]*\.(?:txt|log)(?:\.gz)?$")
EXIT_FILES = ("manifest.json", "exit_code", "exit_code.txt", "exitcode")
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv"}
MAX_FILES = 100_000


@dataclass
class RunInputs:
    """Everything known about one run before parsing."""

    run_id: str
    root: Path | None = None
    trace_files: list[Path] = field(default_factory=list)
    stderr: list[Path] = field(default_factory=list)  # '-' is represented by Path('-')
    stdout: list[Path] = field(default_factory=list)
    manifest: Path | None = None  # manifest.json or an exit-code file
    exit_code: str | None = None  # --exit-code value (e.g. '-11', '139', 'SIGSEGV')
    packages: list[Path] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.trace_files or self.stderr or self.stdout or self.manifest or self.packages
                    or self.exit_code is not None)


def _kind(path: Path) -> str | None:
    name = path.name
    if TRACE_RE.match(name):
        return "trace"
    if name.endswith(".pt2"):
        return "package"
    m = STREAM_RE.match(name)
    if m:
        return m["stream"]
    if name in EXIT_FILES:
        return "exit"
    return None


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(d.iterdir())
        except OSError as exc:
            raise InputError(f"cannot read folder {d}: {exc.strerror}") from None
        for p in entries:
            if p.is_symlink():
                continue
            if p.is_dir():
                if p.name not in SKIP_DIRS:
                    stack.append(p)
            elif _kind(p):
                found.append(p)
                if len(found) > MAX_FILES:
                    raise InputError(f"{root}: more than {MAX_FILES} candidate files below it; point at a smaller folder")
    return sorted(found)


def _run_id(root: Path, base: Path) -> str:
    try:
        rel = root.relative_to(base)
    except ValueError:
        rel = root
    if str(rel) in ("", "."):
        return root.resolve().name or str(root)
    return str(rel)


def _add(run: RunInputs, path: Path, kind: str) -> None:
    if kind == "trace":
        run.trace_files.append(path)
    elif kind == "package":
        run.packages.append(path)
    elif kind == "stderr":
        run.stderr.append(path)
    elif kind == "stdout":
        run.stdout.append(path)
    elif kind == "exit":
        # manifest.json wins over a bare exit-code file
        if run.manifest is None or path.name == "manifest.json":
            run.manifest = path


def discover(
    paths: list[str | Path],
    stderr: str | Path | None = None,
    stdout: str | Path | None = None,
    exit_code: str | None = None,
) -> list[RunInputs]:
    """Group the given inputs into runs. Raises :class:`InputError` for a missing or unusable path."""
    runs: dict[str, RunInputs] = {}
    order: list[str] = []

    def get(run_id: str, root: Path | None) -> RunInputs:
        if run_id not in runs:
            runs[run_id] = RunInputs(run_id=run_id, root=root)
            order.append(run_id)
        return runs[run_id]

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
        if path.is_file():
            kind = _kind(path)
            if kind is None:
                kind = _sniff(path)
            _add(get(path.name if kind != "exit" else path.parent.name or str(path), path.parent), path, kind)
            continue
        files = _walk(path)
        run_dirs = {f.parent for f in files if _kind(f) in ("stderr", "stdout", "exit")}
        for f in files:
            owner = next((a for a in [f.parent, *f.parent.parents] if a in run_dirs), path)
            _add(get(_run_id(owner, path), owner), f, _kind(f))  # type: ignore[arg-type]
        if not files:
            get(_run_id(path, path.parent), path)  # an empty run: analysis reports "no inputs found"

    extra = [(stderr, "stderr"), (stdout, "stdout")]
    if any(v is not None for v, _ in extra) or exit_code is not None:
        # Explicit streams join the only run, or form their own run.
        target = runs[order[0]] if len(order) == 1 else get("cli", None)
        for value, kind in extra:
            if value is None:
                continue
            p = Path(value)
            if str(value) != "-" and not p.is_file():
                raise InputError(f"no such file: {p}")
            _add(target, p, kind)
        if exit_code is not None:
            target.exit_code = exit_code
    if not order:
        raise InputError("nothing to analyse: give a trace folder, a capture folder, a .pt2, or --stderr")
    return [runs[r] for r in order]


def _sniff(path: Path) -> str:
    """Classify a file given explicitly whose name does not tell what it is."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if head.startswith(b"PK\x03\x04"):
        return "package"
    if head.startswith(b"\x1f\x8b"):
        return "trace"
    if re.search(rb"^(?:\[rank\d+\]:)?V\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ \S+:\d+\] \{\"", head, re.M):
        return "trace"
    return "stderr"  # any other text file given explicitly is treated as a captured log
