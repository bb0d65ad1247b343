"""`aoti-trace frames PATH... [-o DIR] [-f parquet|ndjson|csv]`: dump the parsed frames.

Without ``--out`` prints one line per frame with its row count. With ``--out`` writes one file per non-empty frame
(``<DIR>/<frame>.<ext>``) and names the empty frames it left out on stderr. Frames are flat (no nested columns), so
every format can hold them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from aoti_trace.cli import cli
from aoti_trace.cli.options import format_option, out_option
from aoti_trace.model.errors import ReportError

if TYPE_CHECKING:
    from aoti_trace.model.frames import Frames

EXTENSIONS = {"parquet": "parquet", "ndjson": "ndjson", "csv": "csv"}


def build(paths: list[str]) -> Frames:
    """Frames of everything found under ``paths`` (the same discovery and parsing as ``analyze``)."""
    from aoti_trace.pipeline import build_frames
    from aoti_trace.discover import discover
    from aoti_trace.model.frames import Frames

    runs = discover(list(paths))
    try:
        return build_frames(runs)
    except ImportError as exc:  # an ingest module not landed yet: the trace frames still work
        from aoti_trace.ingest.trace.reader import read_trace

        click.echo(f"aoti-trace: warning: {exc}; only the TORCH_TRACE frames are built", err=True)
        frames = Frames()
        for run in runs:
            if run.trace_files:
                frames.merge(read_trace(run.trace_files, run.run_id))
        return frames


def write_frames(frames: Frames, out: Path, fmt: str) -> list[Path]:
    """Write every non-empty frame to ``out/<name>.<ext>``; returns the files written."""
    from aoti_trace.model.frames import FRAME_NAMES

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create {out}: {exc.strerror}") from None
    written = []
    for name in FRAME_NAMES:
        df = frames[name]
        if df.is_empty():
            continue
        target = out / f"{name}.{EXTENSIONS[fmt]}"
        try:
            getattr(df, f"write_{fmt}")(target)
        except OSError as exc:
            raise ReportError(f"cannot write {target}: {exc.strerror}") from None
        written.append(target)
    return written


@cli.command("frames")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@out_option("write one file per non-empty frame into this folder", file_okay=False)
@format_option(sorted(EXTENSIONS), "parquet")
def frames_command(paths: tuple[str, ...], out: Path | None, fmt: str) -> None:
    """Parse PATHs into frames; print row counts, or write them to --out."""
    from aoti_trace.model.frames import FRAME_NAMES

    frames = build(list(paths))
    if out is None:
        width = max(len(n) for n in FRAME_NAMES)
        for name in FRAME_NAMES:
            click.echo(f"{name:<{width}}  {frames[name].height:>9}")
        return
    for target in write_frames(frames, out, fmt):
        click.echo(str(target))
    empty = [name for name in FRAME_NAMES if frames[name].is_empty()]
    if empty:
        click.echo(f"aoti-trace: {len(empty)} empty frames not written: {', '.join(empty)}", err=True)
