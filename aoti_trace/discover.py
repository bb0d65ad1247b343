"""Find the inputs of an analysis and group them into runs.

A *run* is one analysed process (or capture). Inputs are discovered from the paths the user gives:

* a TORCH_TRACE folder or a single trace file (``dedicated_log_torch_trace*.log``, optionally ``.gz``);
* a capture folder written by ``aoti-trace run`` (``manifest.json``, ``stdout.txt``, ``stderr.txt``, ``trace/``);
* a ``.pt2`` package;
* any folder: trace logs anywhere below, files named ``stderr*`` / ``stdout*`` (``.txt``, ``.log``),
  ``manifest.json`` / ``exit_code`` files and ``.pt2`` packages are collected.

Every folder that holds a manifest, an exit-code file or a stderr/stdout file is a run; trace logs and packages
belong to the nearest such folder above them. Whatever is left forms one run per given path.

Walking a folder is safe on hostile trees. Only regular files are collected: a FIFO, device or socket with an
input's name would block or never end, so it is *skipped* (``RunInputs.skipped``, reported as a ``damage`` row),
and so is a file this user cannot read. Symbolic links are followed when their target lies inside the analysed
folder (a symlinked ``stderr.txt`` or ``trace/``); a folder reached twice (a link loop, or a link to a folder that
is walked anyway) is walked once, and a file reached through several names is read once. A link that points
outside the analysed folder, or nowhere, is skipped and reported: the report must not quote files from elsewhere.
Explicit ``--stderr`` / ``--stdout`` values may also be pipes (``--stderr <(cmd)`` is ``/dev/fd/N``).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from aoti_trace.model.errors import InputError
from aoti_trace.ingest.files import special_file

TRACE_RE = re.compile(r"^dedicated_log_torch_trace.*\.log(?:\.gz)?$")
STREAM_RE = re.compile(r"^(?P<stream>stderr|stdout)[\w.-]*\.(?:txt|log)(?:\.gz)?$")
EXIT_FILES = ("manifest.json", "exit_code", "exit_code.txt", "exitcode")
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv"}
MAX_FILES = 100_000


@dataclass(frozen=True)
class Skipped:
    """A candidate input that was found but not read; it becomes a ``damage`` row of its run."""

    path: Path
    kind: str  # not_regular_file | unreadable | symlink_skipped
    detail: str


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
    skipped: list[Skipped] = field(default_factory=list)  # found, but not read (see the module docstring)

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


def _inside(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def _walk(root: Path) -> tuple[list[Path], list[Skipped]]:
    """Candidate input files below ``root`` (regular, readable, reached by links only from inside ``root``), and
    the candidates that were skipped."""
    found: list[tuple[Path, tuple[int, int], bool]] = []  # (path, (dev, inode), reached through a link)
    skipped: list[Skipped] = []
    try:
        base = root.resolve(strict=True)
        st = os.stat(root)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot read folder {root}: {getattr(exc, 'strerror', None) or exc}") from None
    seen_dirs = {(st.st_dev, st.st_ino)}
    stack: list[tuple[Path, bool]] = [(root, False)]
    while stack:
        d, via_link = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if d == root:
                raise InputError(f"cannot read folder {d}: {exc.strerror}") from None
            skipped.append(Skipped(d, "unreadable", f"cannot read folder {d}: {exc.strerror}; not searched"))
            continue
        for e in entries:
            p = Path(e.path)
            kind = _kind(p)
            try:
                link = e.is_symlink()
                is_dir = e.is_dir()  # follows a link
            except OSError:
                continue
            if link:
                why = _link_problem(p, base)
                if why is not None:
                    if kind or is_dir:
                        skipped.append(Skipped(p, "symlink_skipped", f"{p} is a symbolic link {why}; not read"))
                    continue
            if is_dir:
                if p.name in SKIP_DIRS:
                    continue
                try:
                    dst = e.stat()
                except OSError:
                    continue
                key = (dst.st_dev, dst.st_ino)
                if key not in seen_dirs:  # the loop guard: every folder is walked once
                    seen_dirs.add(key)
                    stack.append((p, via_link or link))
                continue
            if not kind:
                continue
            try:
                fst = e.stat()
            except OSError as exc:
                skipped.append(Skipped(p, "unreadable", f"cannot read {p}: {exc.strerror}"))
                continue
            special = special_file(fst)
            if special is not None:
                skipped.append(Skipped(p, "not_regular_file", f"{p} is {special}, not a file: not read"))
                continue
            if not os.access(p, os.R_OK):
                skipped.append(Skipped(p, "unreadable", f"cannot read {p}: permission denied"))
                continue
            found.append((p, (fst.st_dev, fst.st_ino), via_link or link))
            if len(found) > MAX_FILES:
                raise InputError(f"{root}: more than {MAX_FILES} candidate files below it; point at a smaller folder")
    # one file reached through several names (a link next to its target) is read once, by its own name
    chosen: dict[tuple[int, int], tuple[Path, bool]] = {}
    for p, key, linked in sorted(found, key=lambda f: (f[2], str(f[0]))):
        chosen.setdefault(key, (p, linked))
    return sorted(p for p, _ in chosen.values()), skipped


def _link_problem(link: Path, base: Path) -> str | None:
    """Why the symbolic link ``link`` is not followed (None: its target exists inside ``base``)."""
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        return f"to {os.readlink(link)!r}, which does not exist" if os.path.lexists(link) else "that vanished"
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return "that loops or cannot be resolved"
    if not _inside(target, base):
        return f"to {target}, outside the analysed folder {base} (give that path itself to analyse it)"
    return None


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
        if not path.is_dir():
            what = _special(path)
            raise InputError(f"{path} is {what}, not a file or folder" + (
                ": give a stream as --stderr or --stdout" if what.startswith("a FIFO") else ""))
        files, skipped = _walk(path)
        run_dirs = {f.parent for f in files if _kind(f) in ("stderr", "stdout", "exit")}
        run_dirs |= {s.path.parent for s in skipped if _kind(s.path) in ("stderr", "stdout", "exit")}

        def owner_of(f: Path) -> Path:
            return next((a for a in [f.parent, *f.parent.parents] if a in run_dirs), path)

        for f in files:
            owner = owner_of(f)
            _add(get(_run_id(owner, path), owner), f, _kind(f))  # type: ignore[arg-type]
        for sk in skipped:
            owner = owner_of(sk.path)
            get(_run_id(owner, path), owner).skipped.append(sk)
        if not files and not skipped:
            get(_run_id(path, path.parent), path)  # an empty run: analysis reports "no inputs found"

    extra = [(stderr, "stderr"), (stdout, "stdout")]
    if any(v is not None for v, _ in extra) or exit_code is not None:
        # Explicit streams join the only run, or form their own run.
        target = runs[order[0]] if len(order) == 1 else get("cli", None)
        for value, kind in extra:
            if value is None:
                continue
            p = Path(value)
            if str(value) != "-":
                _check_stream(p, kind)
            _add(target, p, kind)
        if exit_code is not None:
            target.exit_code = exit_code
    if not order:
        raise InputError("nothing to analyse: give a trace folder, a capture folder, a .pt2, or --stderr")
    return [runs[r] for r in order]


def _special(path: Path) -> str:
    try:
        return special_file(os.stat(path)) or "not a regular file"
    except OSError as exc:
        return f"unusable ({exc.strerror})"


def _check_stream(p: Path, kind: str) -> None:
    """An explicit --stderr/--stdout: a regular file or a pipe (``<(cmd)`` is ``/dev/fd/N``); a folder, a device
    or a socket is refused."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise InputError(f"no such file: {p}") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{p} is a folder, not a captured {kind} file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise InputError(f"{p} is {special_file(os.stat(p))}, not a captured {kind} file or pipe")


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
