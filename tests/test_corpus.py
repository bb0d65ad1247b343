"""The fixture corpus: every real case gets the expected primary family and cites the key evidence.

Cases are folders with ``expected.yaml`` under ``fixtures/`` (captured CPU and CUDA runs, public-thread logs,
derived damaged logs). A case marked ``xfail`` documents a known miss and its reason.
"""

from pathlib import Path

import pytest

from aoti_trace import corpus

ROOT = Path(__file__).resolve().parent.parent / "fixtures"
CASES = corpus.find_cases([ROOT]) if ROOT.exists() else []


def test_corpus_is_not_empty():
    assert len(CASES) >= 30, f"only {len(CASES)} fixture cases"


@pytest.mark.corpus
@pytest.mark.parametrize("case", CASES, ids=[str(c.relative_to(ROOT)) for c in CASES])
def test_case(case: Path):
    result = corpus.score_case(case)
    if result.xfail and not result.passed:
        pytest.xfail(result.xfail)
    assert result.error is None, result.error
    assert result.actual == result.expected, f"diagnosed {result.actual}, expected {result.expected}"
    assert not result.missing_evidence, f"primary finding does not cite {result.missing_evidence}"
