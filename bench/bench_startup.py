"""Start-up benchmark: `aoti-trace analyze` on a small real capture vs `python -c "import polars"`, side by side.

Each command runs as a fresh interpreter, alternately, ``--repeat`` times; the best wall time of each and their ratio
are printed with the 1-minute load average before and after. The rule cache is warmed by one untimed run first
(``--cold`` empties a private cache folder before every timed analyze run instead).

    python bench/bench_startup.py [--case fixtures/cases/cpp_compile_error | --stderr FILE] [--repeat 5] [--cold]
                                  [--compare DIR]

``--stderr FILE`` runs ``analyze --stderr FILE`` instead of ``analyze CASE`` (e.g. a 3-line traceback).

``--compare DIR`` also runs the same analyze with the checkout in DIR (e.g. ``git archive`` of an older commit),
alternately with this one and with its own rule cache: a before/after in the same minutes, which is the only fair
comparison on a loaded machine. CPU seconds (user + system of each child) are printed next to the wall times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wall(cmd: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[float, float]:
    """(wall s, CPU s) of one child."""
    before, t = os.times(), time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    after = os.times()
    return time.perf_counter() - t, (after.children_user - before.children_user) + (
        after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="fixtures/cases/cpp_compile_error")
    ap.add_argument("--stderr", type=Path, help="analyze --stderr FILE instead of the case")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="empty the rule cache before every analyze run")
    ap.add_argument("--compare", type=Path, help="another checkout to run alternately (before/after)")
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="aoti-bench-cache-"))
    # this checkout's code, not an installed aoti-trace
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    exe = [sys.executable, "-m", "aoti_trace"]
    env = dict(os.environ, AOTI_TRACE_CACHE_DIR=str(cache))
    polars = [sys.executable, "-c", "import polars"]
    analyze = [*exe, "analyze", "--stderr", str(args.stderr.resolve())] if args.stderr else [*exe, "analyze", args.case]
    helpcmd = [*exe, "--help"]
    runs: dict[str, tuple[list[str], dict[str, str], Path]] = {
        "import polars": (polars, env, REPO), "analyze": (analyze, env, REPO), "--help": (helpcmd, env, REPO)}
    if args.compare:
        other = Path(tempfile.mkdtemp(prefix="aoti-bench-cache-"))
        runs["analyze (compare)"] = (analyze, dict(env, AOTI_TRACE_CACHE_DIR=str(other),
                                                   PYTHONPATH=str(args.compare.resolve())), args.compare.resolve())
    for cmd, e, cwd in runs.values():
        wall(cmd, e, cwd)  # warm the OS file cache (and the rule caches unless --cold)
    load0 = os.getloadavg()[0]
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
    for _ in range(args.repeat):
        for k, (cmd, e, cwd) in runs.items():
            if args.cold and k.startswith("analyze"):
                shutil.rmtree(e["AOTI_TRACE_CACHE_DIR"], ignore_errors=True)
            times[k].append(wall(cmd, e, cwd))
    load1 = os.getloadavg()[0]
    shutil.rmtree(cache, ignore_errors=True)
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in times.items()}
    print(f"case {args.stderr or args.case}; rule cache {'cold' if args.cold else 'warm'}; load avg 1 min {load0:.2f} -> {load1:.2f}")
    for k, v in times.items():
        print(f"{k:18} best {best[k][0]:.3f} s (CPU {best[k][1]:.3f} s)  all {', '.join(f'{w:.3f}' for w, _ in v)}")
    for k in runs:
        if k.startswith("analyze"):
            print(f"ratio {k} / import polars (best of {args.repeat}): wall {best[k][0] / best['import polars'][0]:.2f}, "
                  f"CPU {best[k][1] / best['import polars'][1]:.2f}")


if __name__ == "__main__":
    main()
