"""Fleet scale: triage thousands of runs (captures, CI logs, rank logs) into failure signatures.

:mod:`.signatures` reduces findings to signatures; :mod:`.triage` finds and analyses the runs (local process pool
or Ray) and builds the signature table; :mod:`.render` writes it as text or JSON, :mod:`.html` as a self-contained page.
"""

from aoti_trace.fleet.triage import Triage, compare, triage

__all__ = ["Triage", "compare", "triage"]
