"""Evidence cites a log line as the log wrote it (aoti_trace.engine.cited)."""

from __future__ import annotations

from pathlib import Path

from aoti_trace.engine.cited import as_written
from aoti_trace.pipeline import analyze


def test_decoration_keeps_its_separator():
    # torchrun's '[rank0]: ' separator is removed from the message by ingest; the citation keeps it
    assert as_written("[rank0]:", "NameError('s10 is not defined')", "[rank0]: NameError('s10 is not defined')",
                      500) == "[rank0]: NameError('s10 is not defined')"


def test_long_message_is_clipped_without_counting_the_decoration():
    prefix = "(VllmWorkerProcess pid=802) ERROR 04-23 00:04:19 multiproc_worker_utils.py:240] "
    message = "CalledProcessError: " + "x" * 600
    cited = as_written(prefix, message, prefix + message, 500)
    assert cited == prefix + message[:500]


def test_rewritten_and_overwritten_lines():
    # ingest rewrote the message: the log's own line
    assert as_written(None, "torch._dynamo.exc.UserError: c", "<class 'torch._dynamo.exc.UserError'>: c", 500) \
        == "<class 'torch._dynamo.exc.UserError'>: c"
    # a carriage return overwrote a progress bar: the decoration and the message, not the overwritten text
    assert as_written("[rank1]:", "RuntimeError: x", "[rank1]: 10%|#   \rRuntimeError: x", 500) \
        == "[rank1]:RuntimeError: x"


def test_message_lines_below_an_exception_are_cited_as_written(tmp_path: Path):
    # pytorch/torchtune#2392 (fixtures/public/blind18/torchtune_2392_flex_attention_bwd_novalidchoices)
    log = tmp_path / "stderr.txt"
    log.write_text(
        "[rank0]: torch._inductor.exc.LoweringException: NoValidChoicesError: No choices to select, please consider "
        "adding ATEN into max_autotune_gemm_backends config (defined in torch/_inductor/config.py) to allow at least "
        "one choice. \n[rank0]:   target: flex_attention_backward\n")
    primary = analyze([log]).primary
    assert primary is not None
    assert "\n[rank0]:   target: flex_attention_backward" in primary.evidence[0].text


def test_an_indent_shared_by_the_whole_log_is_not_cited():
    # a log pasted indented as a block (fixtures/public/torchchat_840_host_pointer): the glog header is the decoration
    raw = "  [E520 19:20:12.156885067 shim_common.cpp:311] Exception in aoti_torch: x"
    assert as_written("[E520 19:20:12.156885067 shim_common.cpp:311] ", "Exception in aoti_torch: x", raw, 500) \
        == raw.lstrip()
