"""The README's example output is what the command prints: every line of the block that is not elided (``...``)
or cut (ending in ``…``: a prefix of the printed line) is printed, in that order. (A package is compared with the
machine its capture ran on, so nothing printed depends on the machine that runs the test.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aoti_trace.cli import main

REPO = Path(__file__).resolve().parents[1]


def _examples() -> list[tuple[list[str], list[str]]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```\n(\$ aoti-trace analyze [^\n]+)\n(.*?)```", text, re.S):
        command, body = block
        out.append((command[2:].split()[1:], body.splitlines()))
    return out


@pytest.mark.parametrize("args,lines", _examples(), ids=lambda v: " ".join(v) if isinstance(v, list) and v and
                         not v[0].startswith(("PRIMARY", " ")) else None)
def test_readme_example_output(args, lines, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("NO_COLOR", "1")
    with pytest.raises(SystemExit):
        main(args)
    printed = capsys.readouterr().out.splitlines()
    pos = 0
    for line in lines:
        if not line.strip() or line.strip() == "...":
            continue
        want = line[:-1] if line.endswith("…") else line
        for i in range(pos, len(printed)):
            if printed[i] == want or (line.endswith("…") and printed[i].startswith(want)):
                pos = i + 1
                break
        else:
            pytest.fail(f"README line not printed (in order): {line!r}")


def test_there_is_an_example():
    assert _examples(), "the README has no `$ aoti-trace analyze` example block"
