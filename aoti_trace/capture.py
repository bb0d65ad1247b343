"""``python3 -m aoti_trace.capture``: the capture as a standard-library command, for machines where only Python and
torch are installed (no Polars, pydantic or click needed)::

    python3 -m aoti_trace.capture --out DIR [--timeout S] [--check-inputs] [--logs VALUE] [--env K=V ...] -- CMD ...

The supervision itself is :func:`aoti_trace.run.capture.capture`; ``aoti-trace run`` is the same with the analysis.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aoti_trace.run.capture import CaptureFailed, _note, capture, parse_env_assignments


def main(argv: list[str] | None = None) -> int:
    """``python3 -m aoti_trace.capture --out DIR [options] -- CMD ...``; exits with the command's status."""
    parser = argparse.ArgumentParser(
        prog="python3 -m aoti_trace.capture",
        description="Run CMD with AOTI debug variables set; write stdout/stderr/trace/manifest.json to --out.",
    )
    parser.add_argument("--out", required=True, help="capture folder to create")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before the command is ended")
    parser.add_argument("--check-inputs", action="store_true", help="set AOTI_RUNTIME_CHECK_INPUTS=1")
    parser.add_argument("--logs", default=None, help="TORCH_LOGS value (validated first)")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="extra variable (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="do not echo the command's output")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ...")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    try:
        res = capture(cmd, Path(args.out), logs=args.logs, check_inputs=args.check_inputs,
                      extra_env=parse_env_assignments(args.env), timeout=args.timeout, echo=not args.quiet)
    except CaptureFailed as exc:
        _note(f"error: {exc}")
        return 2
    _note(f"captured to {res.out_dir}: {res.describe()}")
    if res.timed_out:
        return 124
    return res.exit_code if res.exit_code >= 0 else 128 - res.exit_code


if __name__ == "__main__":
    sys.exit(main())
