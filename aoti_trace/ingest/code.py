"""Generated code that the frames point at, as the derived frames ``code`` and ``generated`` (read on first use).

* :func:`code_frame`: the trace's code dumps (payloads of ``inductor_aot_wrapper_code`` / ``inductor_aot_kernel_code``
  artifacts, ``graph_dump`` records and output-code artifacts; the newest of each kind) and the C++ kernel entries of
  the run's ``.pt2`` packages (the ``package`` frame's ``kernel`` facts). The Triton out-of-bounds reasoner reads the
  wrapper from it; the HTML report shows excerpts of it.
* :func:`generated_frame`: the generated files a log names (a device assert's ``kernel_file``, ``x.wrapper.cpp:N`` /
  ``x.kernel.cpp:N`` in a line of text), read from this machine's disk when they are still there (the run happened
  here), else from an entry of the same name in the run's packages.

Both are bounded: the newest :data:`MAX_CODE_ARTIFACTS` code dumps per run, :data:`MAX_GENERATED_FILES` named files per
run, files up to :data:`MAX_SOURCE_BYTES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import polars as pl

from aoti_trace.model.frames import Frames, schema

MAX_CODE_ARTIFACTS = 64  # wrapper and kernel code artifacts per run: the newest ones (a long trace compiles many times)
MAX_DUMPS = 20  # graph dumps / output code per run and kind: the newest ones
MAX_GENERATED_FILES = 16  # generated files named by a run's log
MAX_SOURCE_BYTES = 16 << 20  # a generated file larger than this is not read
CODE_ARTIFACTS = ("inductor_aot_wrapper_code", "inductor_aot_kernel_code")

# `file.wrapper.cpp:LINE` / `file.kernel.cpp:LINE` in log text; found with Polars (Rust regex, linear time): with
# Python's `re`, `finditer` of this lazy pattern is quadratic on a long run of word characters.
GENERATED_REF = r"(?:/|\b)[\w./+-]*?\.(?:wrapper\.cpp|kernel\.cpp):[0-9]{1,9}"


def code_frame(frames: Frames) -> pl.DataFrame:
    """Frame ``code`` (see :data:`aoti_trace.model.frames.SCHEMAS`)."""
    from aoti_trace.ingest.trace.reader import read_payloads

    rows: list[dict[str, Any]] = []
    art = frames["artifacts"]
    if art.height:
        dumps = art.with_row_index("_order").filter(pl.col("payload_offset").is_not_null() & pl.col("payload_length").is_not_null()
                           & pl.col("name").is_not_null())
        picked = pl.concat([
            dumps.filter(pl.col("name").is_in(CODE_ARTIFACTS)).group_by("run_id", maintain_order=True)
            .tail(MAX_CODE_ARTIFACTS),
            dumps.filter(pl.col("name").is_in(CODE_ARTIFACTS)).group_by(["run_id", "name"], maintain_order=True)
            .tail(MAX_DUMPS),
            dumps.filter((pl.col("event") == "graph_dump") | pl.col("name").str.contains("output_code|kernel_code"))
            .group_by("run_id", maintain_order=True).tail(MAX_DUMPS),
        ], how="diagonal_relaxed").unique("_order").sort("_order")  # in the order of the artifacts frame
        read: dict[int, str] = {}
        for (path,), group in picked.partition_by(["path"], as_dict=True, maintain_order=True).items():
            texts = read_payloads(path, list(zip(group["payload_offset"].to_list(), group["payload_length"].to_list())))
            read.update(zip(group["_order"].to_list(), texts))
        rows += [{"run_id": r["run_id"], "path": r["path"], "lineno": r["lineno"], "event": r["event"],
                  "name": r["name"], "source": "trace", "text": read[r["_order"]]} for r in picked.iter_rows(named=True)]
    pkg = frames["package"]
    if pkg.height:
        entries = (pkg.filter((pl.col("key") == "kernel") & pl.col("entry").str.ends_with(".cpp"))
                   .select("run_id", "path", "entry").unique(maintain_order=True).sort("run_id", "path", "entry"))
        entry_texts: dict[str, dict[str, str]] = {}  # each package opened once
        for (path,), group in entries.partition_by(["path"], as_dict=True, maintain_order=True).items():
            wanted = frozenset(group["entry"].to_list())
            entry_texts[path] = _read_entries(path, wanted.__contains__)
        for r in entries.iter_rows(named=True):
            text = entry_texts[r["path"]].get(r["entry"])
            if text is not None:
                rows.append({"run_id": r["run_id"], "path": r["path"], "lineno": None, "event": None,
                             "name": r["entry"], "source": "package", "text": text})
    return pl.DataFrame(rows, schema=schema("code"))


def generated_frame(frames: Frames) -> pl.DataFrame:
    """Frame ``generated`` (see :data:`aoti_trace.model.frames.SCHEMAS`): for each file a run's log names, its text from
    disk, else from the run's packages (an entry with the same base name)."""
    rows: list[dict[str, Any]] = []
    packages = _packages(frames)
    for run_id, files in _named_files(frames).items():
        missing = []
        for file in files:
            text = _disk_text(file)
            if text is not None:
                rows.append({"run_id": run_id, "file": file, "source": "disk", "path": file, "entry": None,
                             "text": text})
            else:
                missing.append(file)
        # the others from the run's packages, each opened once: the first entry with the file's base name
        found: dict[str, tuple[str, str, str]] = {}
        for pkg in packages.get(run_id, []) if missing else []:
            bases = {Path(f).name for f in missing if f not in found}
            by_base: dict[str, tuple[str, str]] = {}
            for entry, text in _read_entries(pkg, lambda name: name.rsplit("/", 1)[-1] in bases).items():
                by_base.setdefault(entry.rsplit("/", 1)[-1], (entry, text))
            for f in missing:
                if f not in found and Path(f).name in by_base:
                    found[f] = (pkg, *by_base[Path(f).name])
        for f in missing:
            if f in found:
                pkg, entry, text = found[f]
                rows.append({"run_id": run_id, "file": f, "source": "package", "path": pkg, "entry": entry,
                             "text": text})
    return pl.DataFrame(rows, schema=schema("generated"))


def _named_files(frames: Frames) -> dict[str, list[str]]:
    """Generated files named per run: device asserts' kernel files, then ``*.wrapper.cpp:N`` / ``*.kernel.cpp:N``
    in lines, exception messages and faults (first :data:`MAX_GENERATED_FILES` distinct per run)."""
    named: dict[str, list[str]] = {}

    def add(run_id: str, file: str | None) -> None:
        if file:
            files = named.setdefault(run_id, [])
            if file not in files and len(files) < MAX_GENERATED_FILES:
                files.append(file)

    da = frames["device_asserts"]
    for r in da.filter(pl.col("kernel_file").is_not_null()).select("run_id", "kernel_file").iter_rows():
        add(*r)
    for name, column in (("lines", "text"), ("exceptions", "message"), ("faults", "what")):
        df = frames[name]
        if not df.height:
            continue
        hits = (df.filter(pl.col(column).str.contains(r"\.(?:wrapper|kernel)\.cpp:\d"))
                .select("run_id", pl.col(column).str.extract_all(GENERATED_REF).alias("refs")).explode("refs")
                .filter(pl.col("refs").is_not_null())
                .select("run_id", pl.col("refs").str.replace(r":[0-9]+$", "").alias("file")))
        for r in hits.iter_rows():
            add(*r)
    return named


def _packages(frames: Frames) -> dict[str, list[str]]:
    pkg = frames["package"]
    if not pkg.height:
        return {}
    out: dict[str, list[str]] = {}
    for run_id, path in pkg.select("run_id", "path").unique(maintain_order=True).iter_rows():
        out.setdefault(run_id, []).append(path)
    return out


def _disk_text(file: str) -> str | None:
    p = Path(file)
    try:
        if p.is_file() and p.stat().st_size <= MAX_SOURCE_BYTES:
            return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        pass
    return None


def _read_entries(path: str, pick: Callable[[str], bool]) -> dict[str, str]:
    """Text of the entries of package ``path`` whose name ``pick`` accepts, in archive order, read in one opening;
    {} for a package that cannot be read (the package frame reports why)."""
    from aoti_trace.model.errors import PackageError
    from aoti_trace.ingest.package.archive import open_archive

    out: dict[str, str] = {}
    try:
        with open_archive(Path(path)) as archive:
            for name in archive.names:
                if pick(name):
                    out[name] = archive.read_text(name)
    except (PackageError, KeyError, OSError, ValueError):  # a damaged package is reported by the package frame
        pass
    return out
