"""The fixture corpus: find the cases, run the analysis on each and compare with its ``expected.yaml``. The one harness
behind ``aoti-trace scoreboard`` (every case below the roots, with per-family precision and recall) and the fixture
part of ``aoti-trace rules test`` (the cases of one folder).

A case is a folder with ``expected.yaml`` (see docs/architecture.md). It passes when the primary finding's family
equals ``primary`` and every ``evidence`` substring appears in the primary finding's evidence texts. A case with
``primary: null`` (a successful run) passes when no error-severity finding exists: warnings such as a deprecated
API may still be reported. ``xfail: <reason>`` marks a known miss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from aoti_trace.model.errors import InputError

if TYPE_CHECKING:
    from aoti_trace.library.loader import RulesSource

NONE = "(none)"


@dataclass
class CaseResult:
    name: str
    path: Path
    origin: str
    device: str
    expected: str  # family or NONE
    actual: str  # family or NONE
    missing_evidence: list[str] = field(default_factory=list)
    xfail: str | None = None
    error: str | None = None
    actual_rule: str | None = None  # rule id of the primary finding

    @property
    def detail(self) -> str:
        """Why a case failed, in a few words (empty when it passed)."""
        if self.error:
            return f"analysis failed: {self.error}"
        if self.expected != self.actual:
            return f"primary {self.actual_rule}"
        return f"evidence lacks {self.missing_evidence!r}" if self.missing_evidence else ""

    @property
    def passed(self) -> bool:
        return self.error is None and self.expected == self.actual and not self.missing_evidence

    @property
    def status(self) -> str:
        if self.passed:
            return "XPASS" if self.xfail else "PASS"
        return "XFAIL" if self.xfail else "FAIL"


# A batch of blind logs not scored yet holds this file: it is left out unless a root names the batch itself (or a
# folder inside it), so that the first run on it is the recorded blind score (fixtures/public/SCORES.md).
UNSCORED = "UNSCORED"


def find_cases(roots: list[Path]) -> list[Path]:
    """Every folder below ``roots`` that holds an ``expected.yaml``, except inside unscored blind batches below a root."""
    cases: list[Path] = []
    for root in roots:
        if not root.exists():
            raise InputError(f"no such folder: {root}")
        held = [m.parent for m in root.rglob(UNSCORED) if m.parent != root]
        cases += sorted(p.parent for p in root.rglob("expected.yaml")
                        if not any(h in p.parents for h in held))
    return cases


def folder_cases(root: Path) -> list[Path]:
    """The cases directly below ``root`` (``rules test``'s fixture folder); none when it does not exist."""
    return sorted(p.parent for p in root.glob("*/expected.yaml")) if root.is_dir() else []


def load_expected(case: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load((case / "expected.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{case / 'expected.yaml'}: {exc}") from None
    if not isinstance(data, dict) or "primary" not in data:
        raise InputError(f"{case / 'expected.yaml'}: needs a 'primary' key (a family or null)")
    return data


def score_case(case: Path, rules_path: RulesSource = None) -> CaseResult:
    from aoti_trace.pipeline import analyze

    exp = load_expected(case)
    result = CaseResult(
        name=case.name, path=case, origin=str(exp.get("origin") or "captured"), device=str(exp.get("device") or "?"),
        expected=exp["primary"] or NONE, actual=NONE, xfail=exp.get("xfail"),
    )
    try:
        analysis = analyze([case], rules_path=rules_path)
    except Exception as exc:  # a case that crashes the analysis is a failed case, not a crashed scoreboard
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    primary = analysis.primary
    if primary is not None and (primary.severity == "error" or result.expected != NONE):
        result.actual = primary.family
        result.actual_rule = primary.rule_id
    texts = [ev.text for ev in primary.evidence] if primary else []
    result.missing_evidence = [s for s in exp.get("evidence") or [] if not any(s in t for t in texts)]
    return result


def score(roots: list[Path], rules_path: RulesSource = None) -> list[CaseResult]:
    return [score_case(c, rules_path) for c in find_cases(roots)]


def family_table(results: list[CaseResult]) -> list[dict[str, Any]]:
    """Per-family precision and recall of the primary diagnosis (cases with xfail included: it is a scoreboard)."""
    families = sorted({r.expected for r in results} | {r.actual for r in results})
    rows = []
    for fam in families:
        tp = sum(r.expected == fam and r.actual == fam for r in results)
        fp = sum(r.expected != fam and r.actual == fam for r in results)
        fn = sum(r.expected == fam and r.actual != fam for r in results)
        rows.append({
            "family": fam, "cases": tp + fn, "tp": tp, "fp": fp, "fn": fn,
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
        })
    return rows


def confusion(results: list[CaseResult]) -> dict[tuple[str, str], int]:
    """(expected, actual) -> count, for the cases where the two differ."""
    out: dict[tuple[str, str], int] = {}
    for r in results:
        if r.expected != r.actual:
            out[(r.expected, r.actual)] = out.get((r.expected, r.actual), 0) + 1
    return out


def render_markdown(results: list[CaseResult]) -> str:
    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.0f}%"

    passed = sum(r.passed for r in results)
    lines = [f"**{passed}/{len(results)} cases pass** "
             f"({sum(r.status == 'XFAIL' for r in results)} expected failures)", "",
             "| family | cases | TP | FP | FN | precision | recall |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in family_table(results):
        lines.append(f"| {row['family']} | {row['cases']} | {row['tp']} | {row['fp']} | {row['fn']} | "
                     f"{pct(row['precision'])} | {pct(row['recall'])} |")
    conf = confusion(results)
    if conf:
        lines += ["", "| expected | diagnosed as | cases |", "| --- | --- | --- |"]
        lines += [f"| {e} | {a} | {n} |" for (e, a), n in sorted(conf.items())]
    lines += ["", "| case | origin | device | expected | diagnosed | status | note |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        note = r.error or (f"missing evidence: {r.missing_evidence}" if r.missing_evidence else "") or (r.xfail or "")
        lines.append(f"| {r.name} | {r.origin} | {r.device} | {r.expected} | {r.actual} | {r.status} | {note} |")
    return "\n".join(lines) + "\n"
