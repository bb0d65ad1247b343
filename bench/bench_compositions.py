"""Benchmark: `aoti-trace analyze` and `aoti-trace frames` end to end on three TORCH_TRACE log compositions.

    python3 bench/bench_compositions.py [--sizes 1000] [--only bench,cuda,payload] [--commands analyze,frames]

Each log is built by :func:`bench_trace.build_log` (records of real fixture traces replicated byte for byte, one
merged ``str`` table, stack file ids remapped, ``frame_id`` offset per replica, every MD5 valid) into
``bench/data/<composition>_<N>MB/`` (git-ignored):

* ``bench``: every record of every fixture trace (``fixtures/cases/*/trace``, ``fixtures/traces/*/trace``): the log
  of bench_trace.py, dominated by ``chromium_event`` records and ``compilation_metrics`` headers;
* ``cuda``: every record of the real CUDA compile traces only (``fixtures/cases/cuda_*/trace``);
* ``payload``: only the records with a payload of 2 KB or more (graph dumps, inductor output code, FX graphs,
  ``fx_graph_runnable``): few headers, many payload lines.

Each command runs in a child process (wall, user + system CPU, peak RSS from ``os.wait4``), with the 1-minute load
average before it; a markdown table is printed at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_trace import ROOT, build_log, cli, machine, run_timed  # noqa: E402

PAYLOAD_MIN = 2048


def _big_payload(header: bytes, payload: bytes) -> bool:
    return len(payload) >= PAYLOAD_MIN


def build(composition: str, size_mb: int) -> Path:
    if composition == "bench":
        return build_log(size_mb)
    if composition == "cuda":
        sources = sorted(ROOT.glob("fixtures/cases/cuda_*/trace/dedicated_log_torch_trace_*.log"))
        return build_log(size_mb, sources=sources, name="cuda")
    if composition == "payload":
        return build_log(size_mb, keep=_big_payload, name="payload")
    raise SystemExit(f"unknown composition {composition!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000")
    ap.add_argument("--only", default="bench,cuda,payload")
    ap.add_argument("--commands", default="analyze,frames")
    args = ap.parse_args()
    exe = cli()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for comp in args.only.split(","):
            log = build(comp, size)
            mb = log.stat().st_size / 1e6
            for command in args.commands.split(","):
                cmd = [*exe, "analyze", str(log.parent), "-f", "json", "-o", os.devnull] if command == "analyze" \
                    else [*exe, "frames", str(log.parent)]
                load = os.getloadavg()[0]
                wall, rss, rc, cpu = run_timed(cmd)
                rows.append((comp, command, mb, wall, cpu, rss, load, rc))
                print(f"{comp} {command} {mb:.0f} MB: {wall:.1f} s ({mb / wall:.0f} MB/s), CPU {cpu:.1f} s, "
                      f"peak RSS {rss:.0f} MB, load {load:.2f}, exit {rc}", flush=True)
    print(f"\n{machine()}\n")
    print("| composition | command | log MB | wall s | MB/s | CPU s | peak RSS MB | load avg 1 min | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for comp, command, mb, wall, cpu, rss, load, rc in rows:
        print(f"| {comp} | {command} | {mb:.0f} | {wall:.1f} | {mb / wall:.0f} | {cpu:.1f} | {rss:.0f} | {load:.2f} "
              f"| {rc} |")


if __name__ == "__main__":
    main()
