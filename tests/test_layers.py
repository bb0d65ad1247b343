"""The layers (issue 14): the model, the engine and the reports are pure functions of rules, frames and findings —
they open no file (what they need from files comes from frames that ingest reads) — only the CLI knows click, and the
model (what every layer shares) imports no other layer at module level."""

import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "aoti_trace"
FILE_READING = re.compile(r"\bopen\(|read_text|read_bytes|zipfile")
CLICK = re.compile(r"^\s*(?:import click|from click)", re.M)


@pytest.mark.parametrize("layer", ["model", "engine", "report"])
def test_engine_and_reports_read_no_files(layer):
    hits = [f"{p.relative_to(PKG)}:{n}: {line.strip()}"
            for p in sorted((PKG / layer).rglob("*.py"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if FILE_READING.search(line)]
    assert not hits, "file reading in " + layer + ":\n" + "\n".join(hits)


def test_only_the_cli_imports_click():
    hits = [str(p.relative_to(PKG)) for p in sorted(PKG.rglob("*.py"))
            if "cli" not in p.relative_to(PKG).parts and CLICK.search(p.read_text(encoding="utf-8"))]
    assert not hits, hits


def test_the_model_imports_no_other_layer_at_module_level():
    """model/ is imported by every layer; a module-level import of ingest, engine, report, run, fleet or the CLI would
    make it depend on them (the notebook display imports the HTML report inside the method that needs it)."""
    other = re.compile(r"^(?:from|import) aoti_trace\.(?!model\b)(\w+)", re.M)
    hits = [f"{p.relative_to(PKG)}: {m.group(0)}" for p in sorted((PKG / "model").rglob("*.py"))
            for m in other.finditer(p.read_text(encoding="utf-8").split("if TYPE_CHECKING:")[0])]
    assert not hits, hits
