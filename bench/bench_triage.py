"""Benchmark: `aoti-trace triage` over a corpus of copies of the real fixture runs (not committed; built here).

python3 bench/bench_triage.py [--runs 10000] [--dest DIR] [--configs local1,local2,ray] [--keep]

The corpus is built by aoti_trace.fleet.corpus.build_corpus: byte copies of every fixture run (fixtures/cases,
fixtures/public, fixtures/holdout), round-robin, under host=hNNN/model=mNN/rank=R folders. Each configuration is
run through the CLI end to end (a fresh process: import, discovery, analysis, tables, Parquet) with -f json -o;
the table prints wall time, the analysis time the CLI reports, runs/s of both, the CPU seconds of the CLI and its
pool workers (not Ray's), the load average before each, and whether
the Ray and local signature tables are identical. --engine ray runs a local Ray instance (RAY_ADDRESS unset).
The CLI runs this checkout's code (PYTHONPATH), not an installed aoti-trace.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from aoti_trace.fleet.corpus import DEFAULT_SOURCES, build_corpus, source_runs

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"local1": ["--engine", "local", "-j", "1"], "local2": ["--engine", "local", "-j", "2"],
           "ray": ["--engine", "ray"]}


def uptime() -> str:
    """The load average (1/5/15 min) from /proc/loadavg, else `uptime`."""
    try:
        return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--dest", type=Path)
    ap.add_argument("--configs", default="local1,local2,ray")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    dest = args.dest or Path(tempfile.mkdtemp(prefix="aoti-triage-bench-"))
    corpus = dest / "corpus"
    if not corpus.exists():
        sources = source_runs([ROOT / s for s in DEFAULT_SOURCES])
        t = time.perf_counter()
        build_corpus(corpus, args.runs, sources)
        size = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
        print(f"corpus: {args.runs} runs from {len(sources)} fixture runs, {size / 1e6:.0f} MB, built in "
              f"{time.perf_counter() - t:.0f} s at {corpus}", flush=True)
    exe = [sys.executable, "-m", "aoti_trace", "triage", str(corpus), "-f", "json"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # the code of this checkout, not an installed aoti-trace (python -m resolves from PYTHONPATH first)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    rows = []
    for name in args.configs.split(","):
        if name not in CONFIGS and name.startswith("local"):  # localN: N workers
            CONFIGS[name] = ["--engine", "local", "-j", name[5:]]
        load = uptime()
        out = dest / f"out-{name}"
        t = time.perf_counter()
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([*exe, *CONFIGS[name], "-o", str(out)], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)  # the CLI and its pool workers
        if r.returncode != 0 and name == "ray" and "needs Ray" in r.stderr:
            print("ray: not installed here, skipped", flush=True)
            continue
        if r.returncode != 0:
            sys.exit(f"{name}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
        doc = json.loads(r.stdout)
        rows.append((name, doc["runs"], wall, doc["seconds"], doc["workers"], len(doc["signatures"]), load))
        print(f"{name:7} {doc['runs']} runs  wall {wall:7.1f} s ({doc['runs'] / wall:6.1f} runs/s)  analysis "
              f"{doc['seconds']:7.1f} s ({doc['runs'] / doc['seconds']:6.1f} runs/s)  workers {doc['workers']}  "
              f"{len(doc['signatures'])} signatures  CPU {cpu:.0f} s ({1000 * cpu / doc['runs']:.1f} ms/run; Ray's "
              f"workers are not counted)  | before: {load}", flush=True)
    print(f"after: {uptime()}")
    tables = {n: pl.read_parquet(dest / f"out-{n}" / "signatures.parquet") for n, *_ in rows}
    names = list(tables)
    for other in names[1:]:
        try:
            assert_frame_equal(tables[names[0]], tables[other])
            print(f"signature tables {names[0]} == {other}: identical ({tables[other].height} rows)")
        except AssertionError as exc:
            print(f"signature tables {names[0]} != {other}: {str(exc).splitlines()[0]}")
    if not args.keep and args.dest is None:
        shutil.rmtree(dest)


if __name__ == "__main__":
    main()
