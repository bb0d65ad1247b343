"""The package is typed (issue 14): it ships ``py.typed``, and ``mypy --strict`` finds nothing in it, with the settings
of ``[tool.mypy]`` in pyproject.toml (the same check as running ``mypy`` in the checkout). Skipped only when mypy is
not installed (it is in the ``test`` extra)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_package_ships_py_typed():
    assert (ROOT / "aoti_trace" / "py.typed").is_file()


@pytest.mark.slow
def test_mypy_strict_is_clean():
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install -e '.[test]')")
    cwd = os.getcwd()
    os.chdir(ROOT)  # the [tool.mypy] settings (files = aoti_trace, strict) are found from here
    try:
        stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--no-color-output",
                                          "--no-error-summary"])
    finally:
        os.chdir(cwd)
    assert status == 0 and not stdout.strip(), f"mypy --strict found problems:\n{stdout}{stderr}"
