"""A derived corpus for fleet tests and benchmarks: copies of real fixture captures under varied host/model/rank ids.

Nothing is invented: each run of the corpus is a byte-for-byte copy of the input files (traces, stderr/stdout,
manifest, packages) of one real fixture run, placed at ``<dest>/host=hNNN/model=mNN/rank=R/NNNNN-<case>/`` so that
the Hive-style folders give it a host, model and rank (:func:`aoti_trace.fleet.triage.run_facts`). The sources
are taken round-robin from the fixture runs, the ids from a seeded random generator: the same arguments build the
same corpus.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from aoti_trace.discover import RunInputs, discover

DEFAULT_SOURCES = ("fixtures/cases", "fixtures/public", "fixtures/holdout")


def source_runs(roots: list[str | Path]) -> list[RunInputs]:
    """The fixture runs below ``roots`` (folders holding an ``expected.yaml``), sorted by path."""
    runs = []
    for root in roots:
        for case in sorted(Path(root).rglob("expected.yaml")):
            runs += [r for r in discover([case.parent]) if not r.is_empty()]
    return sorted(runs, key=lambda r: str(r.root))


def build_corpus(dest: str | Path, n: int, sources: list[RunInputs], *, hosts: int = 40, models: int = 12,
                 ranks: int = 8, seed: int = 0) -> list[Path]:
    """Copy ``n`` runs into ``dest`` (see the module docstring); returns the run folders."""
    rng = random.Random(seed)
    dest = Path(dest)
    out = []
    for i in range(n):
        src = sources[i % len(sources)]
        folder = (dest / f"host=h{rng.randrange(hosts):03d}" / f"model=m{rng.randrange(models):02d}"
                  / f"rank={rng.randrange(ranks)}" / f"{i:05d}-{src.root.name}")  # type: ignore[union-attr]  # discovered runs have a root
        files = [*src.trace_files, *src.stderr, *src.stdout, *src.packages]
        if src.manifest is not None:
            files.append(src.manifest)
        for f in files:
            target = folder / f.relative_to(src.root)  # type: ignore[arg-type]  # as above
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
        out.append(folder)
    return out
