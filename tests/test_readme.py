"""The README's quick start is what CI runs: keep the two in sync."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = _bash_blocks(quick)
    assert len(blocks) == 2, "the quick start has exactly two set-up commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1] in ci.splitlines(), f"{blocks[1]!r} is not a line of .ci/run"


def test_quick_start_fixture_exists():
    readme = (ROOT / "README.md").read_text()
    first = _bash_blocks(readme.split("## Quick start", 1)[1])[0]
    fixture = re.search(r"aoti-trace analyze (\S+)", first)[1]
    assert (ROOT / fixture).is_dir()
