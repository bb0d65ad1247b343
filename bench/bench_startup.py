"""Start-up benchmark: `aoti-trace analyze` on a small real capture vs `python -c "import polars"`, side by side.

Each command runs as a fresh interpreter, alternately, ``--repeat`` times; the best wall time of each and their ratio
are printed with the 1-minute load average before and after. The rule cache is warmed by one untimed run first
(``--cold`` empties a private cache folder before every timed analyze run instead).

    python bench/bench_startup.py [--case fixtures/cases/cpp_compile_error] [--repeat 5] [--cold]
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


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="fixtures/cases/cpp_compile_error")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="empty the rule cache before every analyze run")
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="aoti-bench-cache-"))
    # this checkout's code, not an installed aoti-trace
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    exe = [sys.executable, "-m", "aoti_trace"]
    env = dict(os.environ, AOTI_TRACE_CACHE_DIR=str(cache))
    polars = [sys.executable, "-c", "import polars"]
    analyze = [*exe, "analyze", args.case]
    helpcmd = [*exe, "--help"]
    wall(analyze, env)  # warm the OS file cache (and the rule cache unless --cold)
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {"import polars": [], "analyze": [], "--help": []}
    for _ in range(args.repeat):
        times["import polars"].append(wall(polars, env))
        if args.cold:
            shutil.rmtree(cache, ignore_errors=True)
        times["analyze"].append(wall(analyze, env))
        times["--help"].append(wall(helpcmd, env))
    load1 = os.getloadavg()[0]
    shutil.rmtree(cache, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    print(f"case {args.case}; rule cache {'cold' if args.cold else 'warm'}; load avg 1 min {load0:.2f} -> {load1:.2f}")
    for k, v in times.items():
        print(f"{k:14} best {best[k]:.3f} s  all {', '.join(f'{x:.3f}' for x in v)}")
    print(f"ratio analyze / import polars (best of {args.repeat}): {best['analyze'] / best['import polars']:.2f}")


if __name__ == "__main__":
    main()
