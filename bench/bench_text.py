"""Benchmark: parse a 200k-line stderr built by repeating the real captures in tests/data/text.

python3 bench/bench_text.py [--lines 200000] [--repeat 3]
Prints the best wall time of read_text_bytes (all text frames) and the row counts.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from aoti_trace.ingest.text.reader import read_text_bytes

DATA = Path(__file__).parent.parent / "tests" / "data" / "text"
SOURCES = [
    "aoti_output_code.stderr.txt", "aoti_oob.stderr.txt", "aoti_dtype.stderr.txt", "export_error.stderr.txt",
    "torch_chained.stderr.txt", "printer2_nan.stdout.txt", "ranks_tee.stderr.txt", "fault_truncated_so.stderr.txt",
]


def build(n_lines: int) -> bytes:
    chunks = []
    for name in SOURCES:
        data = (DATA / name).read_bytes()
        chunks.append(data if data.endswith(b"\n") else data + b"\n")
    unit = b"".join(chunks)
    per = unit.count(b"\n")
    body = unit * (n_lines // per + 1)
    cut = 0
    for _ in range(n_lines):
        cut = body.index(b"\n", cut) + 1
    return body[:cut]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    data = build(args.lines)
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        f = read_text_bytes(data, "stderr", "bench", "stderr.txt")
        best = min(best, time.perf_counter() - t0)
    counts = {n: f[n].height for n in ("lines", "exceptions", "device_asserts", "faults", "printer", "damage")}
    n = data.count(b"\n")
    print(f"lines={n} bytes={len(data)} best_s={best:.3f} loadavg={os.getloadavg()[0]:.2f} "
          f"cpus={os.cpu_count()} frames={counts}")


if __name__ == "__main__":
    main()
