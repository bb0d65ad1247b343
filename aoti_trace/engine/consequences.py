"""Collective failures as consequences: the rank that failed for a reason of its own comes first.

When one rank of a distributed job crashes, the other ranks wait in their next collective until NCCL's watchdog
times it out or aborts the communicator, gloo's transport sees the peer close, and torchrun stops the job. Those
findings (family ``distributed``) are true, but they are not why the job failed.

:func:`mark` works on the findings of one *job*: one run (a log with ``[rankN]:`` lines, a folder of rank traces)
or, in ``analyze``, the runs :func:`job_of` puts together (per-rank captures of one launch). In a job where

* some ranks have an error finding of family ``distributed`` (not a carrier), the *collateral* ranks, and
* another rank has an error finding of another family (log damage aside) that is not only on collateral ranks,

the findings whose ranks are all collateral get ``fields.consequence_of`` (the first failing rank), the finding of
the first failing rank gets ``fields.consequences`` (the collateral ranks, as ranges), and if the primary finding
was a consequence, the best-ranked finding of a failing rank becomes primary instead. The first failing rank: the
rank of the failing finding whose line comes first by its glog time stamp, else the best-ranked one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from aoti_trace.model.ranks import rank_ranges

if TYPE_CHECKING:
    from aoti_trace.discover import RunInputs
    from aoti_trace.model.findings import Finding
    from aoti_trace.model.frames import Frames

COLLECTIVE = "distributed"
NOT_A_CAUSE = frozenset({COLLECTIVE, "log_damage"})  # a killed rank's cut log is damage, not a reason


def mark(findings: list[Finding], times: dict[tuple[str, str, str], str | None] | None = None,
         job: Callable[[str], str] | None = None) -> list[Finding]:
    """``findings`` (in rank order) with consequences marked per job (module docstring); ``times``: the glog time
    stamp of each finding's first line, keyed by (run id, rule id, message); ``job``: run id -> job key."""
    times = times or {}
    job = job or (lambda run_id: run_id)
    out = list(findings)
    jobs: dict[str, list[int]] = {}
    for i, f in enumerate(out):
        jobs.setdefault(job(f.run_id), []).append(i)
    moved_primary = False
    for idx in jobs.values():
        errors = [i for i in idx if out[i].severity == "error" and out[i].ranks]
        collateral = {r for i in errors if out[i].family == COLLECTIVE and out[i].role != "carrier"
                      for r in out[i].ranks}
        failing = [i for i in errors if out[i].family not in NOT_A_CAUSE and not set(out[i].ranks) <= collateral]
        if not collateral or not failing:
            continue
        first = min(failing, key=lambda i: (_time(out[i], times) is None, _time(out[i], times) or "", i))
        own = [r for r in out[first].ranks if r not in collateral]
        rank = out[first].first_rank if out[first].first_rank in own else own[0]
        victims = [i for i in idx if out[i].ranks and set(out[i].ranks) <= collateral]
        for i in victims:
            out[i] = replace(out[i], fields={**out[i].fields, "consequence_of": str(rank)})
        out[first] = replace(out[first], first_rank=rank,
                             fields={**out[first].fields, "consequences": rank_ranges(collateral)})
        if any(out[i].primary for i in victims):
            best = min(failing)  # rank order: the best finding of a failing rank
            out = [replace(f, primary=i == best) if f.primary or i == best else f
                   for i, f in enumerate(out)]
            moved_primary = True
    if moved_primary:  # the primary first, as rank() leaves it
        out.sort(key=lambda f: not f.primary)
    return out


def _time(f: Finding, times: dict[tuple[str, str, str], str | None]) -> str | None:
    return times.get((f.run_id, f.rule_id, f.message))


def job_of(runs: list[RunInputs], frames: Frames) -> Callable[[str], str]:
    """run id -> job key for :func:`mark` across runs: a run whose capture recorded a ``RANK`` belongs to the job of
    its parent folder (``torchrun ... python -m aoti_trace.capture --out rank$RANK``), with the run found in that
    folder itself (the launcher's own log), if any; every other run is a job of its own."""
    from aoti_trace.model.ranks import manifest_ranks

    ranked = manifest_ranks(frames)
    key: dict[str, str] = {}
    for run in runs:
        root = Path(run.root if run.root is not None else run.run_id).absolute()
        key[run.run_id] = str(root.parent if run.run_id in ranked else root)
    return lambda run_id: key.get(run_id, run_id)
