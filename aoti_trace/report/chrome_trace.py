"""``analyze --perfetto FILE``: the trace's ``chromium_event`` records as Chrome Trace Event JSON.

The file opens in Perfetto (https://ui.perfetto.dev, its JSON importer) and in ``chrome://tracing``. Shape (the
JSON Object Format of the Trace Event Format, checked against ``tests/data/schemas/trace-event.schema.json``)::

    {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {"tool": "aoti-trace", ...}}

Each event is a record's payload as torch wrote it (``name``, ``cat``, ``ph``, ``ts`` in microseconds, ``args``, ...)
with ``pid`` replaced by one process per (run, rank, trace file), named by ``process_name`` metadata events (torch
writes ``pid: 0`` everywhere, so two runs or ranks would overlap), and a ``tid`` that is not an integer mapped to
one. Payloads that are not JSON objects with a known phase, a name and a finite time stamp are skipped and
counted in ``otherData.skipped``. Written event by event from the ``chromium`` frame (the caller opens the file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any


from aoti_trace import __version__
from aoti_trace.ingest import safe_json
from aoti_trace.report.common import _phase_event

if TYPE_CHECKING:
    from aoti_trace.model.frames import Frames

# The phases of the Trace Event Format (duration, complete, instant, counter, async, flow, sample, object,
# metadata, memory dump, mark, clock sync, context).
PHASES = frozenset("BEXiICbneSTpFsftPNODMVvRc(),")
KEEP = ("name", "cat", "ph", "ts", "dur", "tts", "tdur", "tid", "id", "id2", "bp", "s", "args", "cname", "scope")


def _event(d: dict[str, Any], pid: int, tids: dict[object, int]) -> dict[str, Any]:
    out = {k: d[k] for k in KEEP if k in d}
    out["name"] = str(d["name"])
    out["ts"] = float(d["ts"])
    out["pid"] = pid
    tid = d.get("tid", 0)
    out["tid"] = tid if isinstance(tid, int) and not isinstance(tid, bool) else tids.setdefault(repr(tid), len(tids))
    if "dur" in out and not isinstance(out["dur"], (int, float)):
        del out["dur"]
    if not isinstance(out.get("args", {}), dict):
        out["args"] = {"value": out["args"]}
    if out["ph"] == "X" and "dur" not in out:
        out["ph"] = "i"  # a complete event without a duration: an instant
    return out


def write_chrome_trace(frames: Frames, fh: IO[str]) -> dict[str, Any]:
    """Write the Chrome trace of ``frames`` (its ``events`` frame) to ``fh``; returns ``otherData``."""
    ev = frames["chromium"]
    processes: dict[tuple[Any, ...], int] = {}
    tids: dict[object, int] = {}
    written = skipped = 0
    fh.write('{"traceEvents": [\n')
    sep = ""
    for (run_id, path), rows in ([] if ev.height == 0 else
                                 ev.sort("run_id", "path", "lineno", maintain_order=True)
                                 .partition_by(["run_id", "path"], as_dict=True, maintain_order=True).items()):
        for row in rows.rows(named=True):
            text = row["payload"]
            try:
                d = safe_json.loads(text)
            except ValueError:
                skipped += 1
                continue
            if not _phase_event(d) or d.get("ph") not in PHASES:
                skipped += 1
                continue
            pid = processes.setdefault((run_id, row["rank"], path), len(processes) + 1)
            try:
                line = json.dumps(_event(d, pid, tids), ensure_ascii=False, allow_nan=False)
            except ValueError:  # NaN or infinity in the args: not JSON
                skipped += 1
                continue
            fh.write(sep + line)
            sep = ",\n"
            written += 1
    for (run_id, rank, path), pid in processes.items():
        name = f"{run_id}" + (f" rank {rank}" if rank is not None else "") + f" ({Path(path).name})"
        fh.write(sep + json.dumps({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                                   "args": {"name": name}}, ensure_ascii=False))
        sep = ",\n"
    other = {"tool": "aoti-trace", "version": __version__, "events": written, "skipped": skipped,
             "runs": sorted({k[0] for k in processes})}
    fh.write(f'\n], "displayTimeUnit": "ms", "otherData": {json.dumps(other, ensure_ascii=False)}}}\n')
    return other
