"""Property tests: any bytes parse without raising, one row per line, damage recorded instead of errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoti_trace.model.frames import FRAME_NAMES, schema
from aoti_trace.ingest.text.lines import KINDS
from aoti_trace.ingest.text.reader import read_text_bytes

REAL = (Path(__file__).parents[2] / "data" / "text" / "aoti_oob.stderr.txt").read_bytes()


def expected_lines(data: bytes) -> int:
    return len(data.split(b"\n")) - (1 if data.endswith(b"\n") or not data else 0)


def check(data: bytes) -> None:
    f = read_text_bytes(data, "stderr", "p")
    assert f["lines"].height == expected_lines(data)
    assert f["lines"]["lineno"].to_list() == list(range(1, f["lines"].height + 1))
    assert set(f["lines"]["kind"].to_list()) <= set(KINDS)
    for name in FRAME_NAMES:
        assert f[name].schema.names()[: len(schema(name))] == list(schema(name)), name
    kinds = set(f["damage"]["kind"].to_list())
    assert ("cut_mid_line" in kinds) <= (bool(data) and not data.endswith(b"\n"))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes(data):
    check(data)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(
    [b"\n", b"\r\n", b"\r", b"\x1b[31m", b"\x1b[0m", b"[rank1]:", b"[rank0]: ", b"\xff", b"Traceback (most recent call last):\n",
     b'  File "x.py", line 3, in f\n', b"RuntimeError: boom\n", b"Error: x\n", b"Fatal Python error: Segmentation fault\n",
     b"Current thread 0x00007f (most recent call first):\n", b"terminate called after throwing an instance of 'c10::Error'\n",
     b"  what():  CUDA error\n", b"[ before_launch: k ]\n", b"[  before_launch - k - buf0  ]:\n", b"Mean value: nan\n",
     b"The above exception was the direct cause of the following exception:\n", b" 1.0 2.0\n",
     b"V1130 05:04:51.314000 11367 torch/x.py:1] [__output_code] Output code: \n",
     b"a.py:1:2: block: [0,0,0], thread: [1,0,0] Assertion `index out of bounds: 0 <= tmp1 < ks0` failed.\n"]),
    max_size=60))
def test_structured_fragments(parts):
    check(b"".join(parts))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(REAL)), st.integers(min_value=0, max_value=len(REAL)))
def test_real_capture_cut_anywhere(a, b):
    """Any slice of a real capture (a log cut at both ends) parses."""
    lo, hi = min(a, b), max(a, b)
    check(REAL[lo:hi])
