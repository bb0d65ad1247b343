"""A log line whose message is a catalogued error (rules/catalogue/*.jsonl) is failure evidence on its own.

The one-line logs here are real public logs of the fixture corpus (fixtures/public/**), pasted as one line with no
traceback, no exit status and no FATAL level. Inputs built from a catalogue template (not a real log) say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aoti_trace import catalogue
from aoti_trace.ingest.text.failure import failures_frame
from aoti_trace.ingest.text.known_messages import MIN_EVIDENCE, error_lines, is_error, lookup
from aoti_trace.ingest.text.reader import read_text_bytes
from aoti_trace.pipeline import build_frames, discover

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "fixtures" / "public"
CATALOGUE = ROOT / "rules" / "catalogue"


def failure_of(case: Path) -> dict | None:
    df = build_frames(discover([case]))["failures"]
    return df.row(0, named=True) if df.height else None


@pytest.mark.parametrize("case, family, raised_in", [
    # ExecuTorch's runtime: an E-level log line of its memory allocator, then an I-level line
    ("blind14/executorch_9491_stm32_method_allocator_pool_exhausted", "out_of_memory",
     "executorch/runtime/core/memory_allocator.h"),
    # ExecuTorch's TensorImpl, the message alone
    ("blind12/torchchat_810_et_demo_app_resize_static_tensor", "shape_mismatch",
     "executorch/runtime/core/portable_type/tensor_impl.cpp"),
    # ET_KERNEL_CHECK_MSG's 'Check failed (cond): ' of a portable/optimized kernel
    ("blind14/executorch_13492_sigmoid_out_bool_input_dtype_check", "dtype_mismatch", "executorch/kernels/"),
    # exir's out-variant lookup, quoted inside an INFO line of the caller
    ("blind13/executorch_7775_quantize_per_token_no_out_variant", "missing_custom_op",
     "executorch/exir/dialects/edge/op/api.py"),
    # c10's cudaMallocAsync allocator, the pasted message without its 'If you need it, ...' tail
    ("blind14/comfyui_wanvideowrapper_1584_cudamallocasync_cudagraph_trees", "environment", "c10/cuda/"),
    # Triton's runtime/build.py
    ("blind14/comfyui_wanvideowrapper_31_triton_no_c_compiler", "environment", "triton/runtime/build.py"),
])
def test_a_pasted_catalogued_error_is_a_failure_with_its_family(case, family, raised_in):
    f = failure_of(PUBLIC / case)
    assert f is not None, "the one line is the only evidence of the failure"
    assert f["signals"] == "known_error_message"
    assert f["family"] == family
    assert raised_in in f["phase_source"] and f["phase_source"].startswith("catalogue: ")


def test_a_soft_executorch_check_is_not_evidence():
    # executorch#7170: E-level 'Check failed (...)' lines of a dtype utility that returns false to a caller that
    # tries the next dtype; the method then ran to completion. Labelled primary: null.
    case = PUBLIC / "blind9" / "executorch_7170_runner_false_positive_dtype_check"
    assert yaml.safe_load((case / "expected.yaml").read_text())["primary"] is None
    assert failure_of(case) is None


def _template(pattern: str, file_name: str) -> dict:
    for line in (CATALOGUE / file_name).read_text().splitlines():
        m = json.loads(line)
        if pattern in m["template"]:
            return m
    raise AssertionError(f"no template with {pattern!r} in {file_name}")


def test_a_warning_template_is_not_evidence():
    m = _template("hit config.", "dynamo.jsonl")
    assert m["warning"] and m["kind"] == "warning"
    # not a real log: Dynamo's recompile-limit warning with its fields filled in by the coverage filler
    text = catalogue.fill(m["template"]).splitlines()[0] + "\n"
    known = lookup(text.strip())
    assert known is not None and known.warning and not is_error(known)
    frames = read_text_bytes(text.encode(), "stderr", "r")
    assert error_lines(frames["lines"]).height == 0
    assert failures_frame(frames).height == 0


def test_an_error_template_line_is_evidence_and_a_handled_level_is_not():
    m = _template("Memory allocation failed: ", "executorch.jsonl")
    # not a real log: the template filled in, once bare and once logged at ExecuTorch's I level
    line = catalogue.fill(m["template"])
    assert failures_frame(read_text_bytes((line + "\n").encode(), "stderr", "r")).row(0, named=True)["family"] \
        == "out_of_memory"
    info = f"I 00:00:00.000000 executorch:memory_allocator.h:88] {line}\n"
    assert failures_frame(read_text_bytes(info.encode(), "stderr", "r")).height == 0


def test_a_message_cut_at_a_sentence_boundary_matches_its_template():
    m = _template("does not yet support checkPoolLiveAllocations", "c10_cuda.jsonl")
    assert m["template"].startswith("{} does not yet support checkPoolLiveAllocations. If you need it")
    known = lookup("cudaMallocAsync does not yet support checkPoolLiveAllocations")
    assert known is not None and known.template == m["template"] and known.literal >= MIN_EVIDENCE
    # a cut inside a sentence is not a match of that sentence
    assert lookup("cudaMallocAsync does not yet support checkPool") is None


def test_every_catalogue_file_fits_the_schema_and_torch_file_has_no_warnings():
    files = sorted(CATALOGUE.glob("*.jsonl"))
    assert {f.name for f in files} >= {"messages.jsonl", "dynamo.jsonl", "c10_cuda.jsonl", "executorch.jsonl",
                                       "triton.jsonl"}
    for f in files:
        messages = catalogue.load(f)
        assert messages, f
        if f.name == "messages.jsonl":
            assert not any(m.warning for m in messages)
        assert not any(m.counted for m in messages if m.warning)


@pytest.mark.slow
def test_null_cases_are_not_failures_by_a_catalogued_line():
    """Every fixture labelled 'no failure' (primary: null): the catalogue makes none of them a failure (a null case
    that other signals already call failed, e.g. a logged exception the rules mark as a warning, may also have a
    catalogued line: that is the rules' business)."""
    cases = sorted(p.parent for p in (ROOT / "fixtures").rglob("expected.yaml")
                   if yaml.safe_load(p.read_text()).get("primary", "x") is None)
    assert len(cases) >= 60
    made = []
    for case in cases:
        failures = build_frames(discover([case]))["failures"]
        made += [f"{case.name}: {w}" for s, w in failures.select("signals", "what").iter_rows()
                 if s == "known_error_message"]
    assert made == []


def test_the_anchor_test_of_a_few_lines_says_what_polars_says():
    """error_lines looks for the anchors in Python below SMALL_CANDIDATES lines, with Polars' contains_any above:
    both say the same of every line of the fixture captures and of anchors placed at the start, middle and end of
    a line, cut by one character, or alone."""
    import random

    import polars as pl

    from aoti_trace.ingest.text import known_messages

    anchors = known_messages._anchors()
    texts = [line[:known_messages.MAX_MESSAGE] for path in sorted((ROOT / "fixtures").rglob("stderr*.txt"))
             for line in path.read_text(encoding="utf-8", errors="replace").split("\n")]
    rng = random.Random(12)
    for anchor in rng.sample(anchors, 300):
        texts += [anchor, anchor[:-1], anchor[1:], f"x: {anchor}", f"{anchor} y", f"RuntimeError: ab {anchor} cd é"]
    texts += ["", "short", "é" * 40]
    expected = pl.Series(texts).str.contains_any(list(anchors)).to_list()
    assert [known_messages._holds_anchor(t) for t in texts] == expected
    assert 1000 < len(texts) and 300 < sum(expected) < len(texts) - 300


def test_a_carrier_message_is_failure_evidence_without_a_family():
    # executorch#14735 (blind round 21): XNNPACK's runtime error, then the method's wrapper line; the log read
    # "No problem found." while the wrapper template was left out of the catalogue lookup
    case = PUBLIC / "blind21" / "executorch_14735_xnnpack_const_dim_order_runtime"
    row = failure_of(case)
    assert row is not None and row["signals"] == "known_error_message"
    assert row["what"] == "CALL_DELEGATE execute failed at instruction 0: 0x1" and row["family"] == "unexplained"
    carrier = lookup("CALL_DELEGATE execute failed at instruction 0: 0x1")
    assert carrier is not None and carrier.carrier and is_error(carrier)

