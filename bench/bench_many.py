"""Benchmark: many small trace files in one folder, end to end through the CLI (not a test).

    python3 bench/bench_many.py [--counts 400,1000,2000,5000] [--workers 0,1]

Builds ``bench/data/many_<N>/`` (git-ignored): N copies of one real fixture trace
(``fixtures/cases/missing_custom_op/trace/dedicated_log_torch_trace_cskortti.log``, 3.9 KB, a compile that fails
on a missing custom op), renamed ``dedicated_log_torch_trace_rank_<i>_cskortti.log``, byte for byte. Runs
``aoti-trace analyze DIR -f json -o /dev/null`` in a child process with ``AOTI_TRACE_WORKERS`` set to each value of
``--workers`` (0: the default, one per core; 1: no pool) and prints wall, CPU (user + system of the child and its
workers), peak RSS (the largest single process) and the load average before the run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "fixtures/cases/missing_custom_op/trace/dedicated_log_torch_trace_cskortti.log"
DATA = ROOT / "bench" / "data"


def build(count: int) -> Path:
    out = DATA / f"many_{count}"
    if out.is_dir() and len(list(out.iterdir())) == count:
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    data = SEED.read_bytes()
    for i in range(count):
        (out / f"dedicated_log_torch_trace_rank_{i}_cskortti.log").write_bytes(data)
    return out


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s of the child and its descendants, peak RSS MB of the largest, exit code)."""
    before = os.times()
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    after = os.times()
    import resource

    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # max over children so far
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system), \
        rss, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="400,1000,2000,5000")
    ap.add_argument("--workers", default="0")
    args = ap.parse_args()
    # this checkout's code, not an installed aoti-trace
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    exe = [sys.executable, "-m", "aoti_trace"]
    print("| files | workers | wall s | CPU s | files/s | peak RSS MB (max so far) | load avg 1 min | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for count in (int(c) for c in args.counts.split(",")):
        folder = build(count)
        for w in args.workers.split(","):
            env = dict(os.environ)
            if w != "0":
                env["AOTI_TRACE_WORKERS"] = w
            load = os.getloadavg()[0]
            wall, cpu, rss, rc = run([*exe, "analyze", str(folder), "-f", "json", "-o", os.devnull], env)
            print(f"| {count} | {w if w != '0' else 'default'} | {wall:.1f} | {cpu:.1f} | {count / wall:.0f} | "
                  f"{rss:.0f} | {load:.2f} | {rc} |", flush=True)


if __name__ == "__main__":
    main()
