"""Reading many TORCH_TRACE files: in parallel, one worker process per core, when there is enough to read.

Files of a run do not depend on each other: each file's frames are those it has when read alone, and the small
files of a batch (of every run in it) are indexed and built together
(:func:`aoti_trace.ingest.trace.reader.read_groups`, which pays Polars' fixed cost per batch, not per file); the
frames of each run are concatenated once. A pool costs ~0.5-1 s of CPU per worker to start (Python, Polars and
aoti-trace imported anew), so the files are read here, all together, when the reading is estimated to take less
than :data:`PARALLEL_MIN_CPU_S` (from the file sizes: :func:`estimated_cpu_s`), or when there is one core. Worker
processes are started with ``spawn`` (Polars' thread pool does not survive ``fork``). On a terminal, a progress bar
appears on stderr when reading takes more than a second.

``AOTI_TRACE_WORKERS`` sets the number of worker processes (``1``: no pool).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import polars as pl

from aoti_trace.model.frames import Frames

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

# Estimated reading CPU below which a pool costs more than it saves: measured on 2 cores at load ~2.6
# (bench/RESULTS.md, section 0000), 5,000 small files (~3 CPU-s of reading) took 3.8 s in one process and 6.5 s
# with two workers (their start, and the frames pickled back).
PARALLEL_MIN_CPU_S = 8.0
# Measured reading cost (sections 000b and 0000): a file read in a batch of small ones ~0.4 ms, a large file
# (streamed alone) ~25 ms, plus ~50 ms per MB either way.
SMALL_FILE_CPU_S, LARGE_FILE_CPU_S, CPU_S_PER_MB = 0.0004, 0.025, 0.05
WORKERS_ENV = "AOTI_TRACE_WORKERS"
PROGRESS_AFTER_S = 1.0
POLARS_THREADS_ENV = "POLARS_MAX_THREADS"


def workers() -> int:
    """Worker processes to use: ``AOTI_TRACE_WORKERS``, else the cores this process may run on."""
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def read_traces(jobs: list[tuple[list[Path], str]], processes: int | None = None) -> Iterator[Frames]:
    """The trace frames of each ``(files, run_id)`` job, in order. ``processes``: worker processes to read them with
    (default :func:`workers`; ``1``: in this process, e.g. inside a worker of a pool that already uses every core)."""
    from aoti_trace.ingest.trace.reader import read_groups

    files = [(Path(path), run_id, j) for j, (paths, run_id) in enumerate(jobs) for path in paths]
    n = workers() if processes is None else processes
    if n < 2 or len(files) < 2 or estimated_cpu_s([path for path, _, _ in files]) < PARALLEL_MIN_CPU_S:
        yield from read_groups([[(Path(path), run_id) for path in paths] for paths, run_id in jobs])
        return
    from concurrent.futures.process import BrokenProcessPool

    per_job: list[list[Frames]] = [[] for _ in jobs]
    try:
        done = _read_parallel(files, min(n, len(files)))
    except (OSError, BrokenProcessPool):  # no processes here (a sandbox, no /dev/shm): read them in this one
        done = _read_batch(files)
    for j, frames in done:
        per_job[j].append(frames)
    for parts in per_job:
        yield _concat(parts)


def estimated_cpu_s(paths: list[Path]) -> float:
    """Estimated CPU seconds to read ``paths`` in this process (file sizes and the measured costs above); a file
    that cannot be stat'ed counts as small and empty (reading it reports the problem)."""
    from aoti_trace.ingest.trace.reader import SMALL_FILE

    total = 0.0
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        total += (SMALL_FILE_CPU_S if size <= SMALL_FILE else LARGE_FILE_CPU_S) + size / 1e6 * CPU_S_PER_MB
    return total


def _read_batch(batch: list[tuple[Path, str, int]]) -> list[tuple[int, Frames]]:
    """Read the files of ``batch`` together; one set of frames per job (run) it touches, files in order."""
    from aoti_trace.ingest.trace.reader import read_groups

    jobs: list[int] = []
    groups: list[list[tuple[Path, str]]] = []
    for path, run_id, job in batch:
        if not jobs or jobs[-1] != job:
            jobs.append(job)
            groups.append([])
        groups[-1].append((path, run_id))
    return list(zip(jobs, read_groups(groups)))


def _read_parallel(files: list[tuple[Path, str, int]], n: int) -> list[tuple[int, Frames]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    size = max(1, min(64, len(files) // (n * 4)))  # a few batches per worker: balance without a round trip per file
    batches = [files[i:i + size] for i in range(0, len(files), size)]
    out: list[list[tuple[int, Frames]] | None] = [None] * len(batches)
    # one Polars thread per worker (the workers already use every core); the workers inherit the environment
    saved = os.environ.get(POLARS_THREADS_ENV)
    os.environ.setdefault(POLARS_THREADS_ENV, "1")
    try:
        with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool, \
                _Progress(len(files)) as bar:
            futures = {pool.submit(_read_batch, batch): i for i, batch in enumerate(batches)}
            for fut in as_completed(futures):
                i = futures[fut]
                out[i] = fut.result()
                bar.advance(len(batches[i]))
    finally:
        if saved is None:
            os.environ.pop(POLARS_THREADS_ENV, None)
    return [item for batch in out for item in batch or []]


def _concat(parts: list[Frames]) -> Frames:
    names: dict[str, list[pl.DataFrame]] = {}
    for frames in parts:
        for name, df in frames.tables.items():
            names.setdefault(name, []).append(df)
    return Frames({name: dfs[0] if len(dfs) == 1 else pl.concat(dfs, how="diagonal_relaxed")
                   for name, dfs in names.items()})


class _Progress:
    """A rich progress bar on stderr, shown only on a terminal and only once the work has taken a second."""

    bar: Progress | None
    task: TaskID | None

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start, self.bar, self.task = total, 0, time.monotonic(), None, None
        self.tty = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"

    def __enter__(self) -> _Progress:
        return self

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is None and self.tty and time.monotonic() - self.start > PROGRESS_AFTER_S:
            from rich.console import Console
            from rich.errors import LiveError
            from rich.progress import Progress

            bar = Progress(console=Console(stderr=True), transient=True)
            try:
                bar.start()
            except LiveError:  # another live display (the analyze spinner) owns the terminal
                self.tty = False
                return
            self.bar, self.task = bar, bar.add_task("reading trace files", total=self.total)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done)  # type: ignore[arg-type]  # task is set with bar

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
