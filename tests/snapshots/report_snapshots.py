"""Every report format of every fixture, kept as hashes: the guard of a refactoring that must not change behaviour.

``python tests/snapshots/report_snapshots.py --update`` renders all formats (:data:`aoti_trace.report.FORMATS`) for every
input below and writes their SHA-256 to ``report_snapshots.json``; ``test_reports.py`` renders them again and compares. The
inputs: every case folder with an ``expected.yaml`` under ``fixtures/``, the damaged captures, the packages and the
multi-file trace. Each input is analysed by its path relative to the repository root, with the root as the working
directory, so that the reports (which name the files they read) are the same on any clone; paths inside the fixtures
themselves (where a capture was made) stay as they are. No ``source_root`` is given to SARIF and GitHub annotations
(the CLI passes the working directory): with one, a location is preferred when the user's file exists under it,
which depends on where the checkout is. To see *what* changed, render one input with both commits
(``--show INPUT FORMAT`` prints the report).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # this checkout's aoti_trace, also when run as a script
    sys.path.insert(0, str(ROOT))
FIXTURES = ROOT / "fixtures"
SNAPSHOT = Path(__file__).with_name("report_snapshots.json")


def inputs() -> list[Path]:
    """The fixture inputs, sorted: case folders, damaged captures, packages (and damaged ones), traces."""
    from aoti_trace.corpus import find_cases

    found = set(find_cases([FIXTURES]))
    found |= {p for p in (FIXTURES / "damaged").iterdir() if p.is_dir()}
    found |= set((FIXTURES / "packages").rglob("*.pt2"))
    found |= {p for p in (FIXTURES / "traces").iterdir() if p.is_dir()}
    return sorted(found)


def key(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def render_all(path: Path) -> dict[str, str]:
    """Format -> report text for one input (analysed once, run from the repository root)."""
    from aoti_trace.pipeline import analyze
    from aoti_trace.report import FORMATS, render

    analysis = analyze([path.relative_to(ROOT)])
    return {fmt: render(analysis, fmt) for fmt in FORMATS}


def digest(path: Path) -> dict[str, str]:
    return {fmt: hashlib.sha256(text.encode()).hexdigest()[:16] for fmt, text in render_all(path).items()}


def _digest_in_root(path: Path) -> dict[str, str]:
    os.chdir(ROOT)  # a pool worker: relative paths in reports are relative to the repository root
    return digest(path)


def digest_all(paths: list[Path]) -> dict[str, dict[str, str]]:
    """Input key -> format -> hash, over a process pool (one worker per core), started with ``spawn``: a worker forked
    from a process that has used Polars can deadlock on a lock held by Polars' thread pool at the fork."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return {key(p): d for p, d in zip(paths, pool.map(_digest_in_root, paths, chunksize=4))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write report_snapshots.json from this checkout")
    ap.add_argument("--show", nargs=2, metavar=("INPUT", "FORMAT"), help="print one report")
    a = ap.parse_args()
    os.chdir(ROOT)
    if a.show:
        sys.stdout.write(render_all(FIXTURES / a.show[0])[a.show[1]])
        return 0
    if a.update:
        snap = digest_all(inputs())
        SNAPSHOT.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
        print(f"{len(snap)} inputs written to {SNAPSHOT}")
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
