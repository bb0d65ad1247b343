"""Report formats on real captures: every format of every fixture case (and the real stderr samples).

Nothing here is hand-written data: each analysis comes from ``aoti_trace.pipeline.analyze`` on files under
``fixtures/`` or ``tests/data/``, and expectations are derived from the frames of that same analysis or read back
independently from the trace (``read_payload``)."""

from __future__ import annotations

import functools
import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoti_trace.model.analysis import Analysis

from aoti_trace.pipeline import analyze
from aoti_trace.model.findings import SEVERITIES
from aoti_trace.ingest.trace.reader import read_payload
from aoti_trace.report import FORMATS, render
from aoti_trace.report.html import markdown_to_html
from aoti_trace.report.common import guide_file, repo_location
from aoti_trace.report.json import DOCUMENT_SCHEMA, RUN_SCHEMA, document_schema, finding_schema

REPO = Path(__file__).resolve().parents[2]
SARIF_SCHEMA = REPO / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json"  # OASIS, committed (see README there)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _is_capture(p: Path) -> bool:
    return p.is_dir() and any((p / n).exists() for n in ("manifest.json", "trace", "stderr.txt"))


CASES = sorted(p.name for p in (REPO / "fixtures" / "cases").iterdir() if _is_capture(p))
STDERR_SAMPLES = sorted(p.name for p in (REPO / "tests" / "data" / "text").glob("*.stderr.txt"))
INPUTS = [f"case:{c}" for c in CASES] + [f"stderr:{s}" for s in STDERR_SAMPLES]


@functools.lru_cache(maxsize=None)
def get(key: str) -> Analysis:
    kind, name = key.split(":", 1)
    if kind == "case":
        return analyze([REPO / "fixtures" / "cases" / name])
    return analyze([], stderr=REPO / "tests" / "data" / "text" / name)


def case(name: str) -> Analysis:
    if name not in CASES:
        pytest.skip(f"fixture case {name} is not in this checkout")
    return get(f"case:{name}")


def test_inputs_exist():
    assert "cpp_compile_error" in CASES and "ok_compile_load_run" in CASES
    assert any(get(k).findings for k in INPUTS), "no real input produced a finding: nothing is really tested"


# ------------------------------------------------------------------------------------------------ text
@pytest.mark.parametrize("key", INPUTS)
def test_text_plain(key):
    a = get(key)
    out = render(a, "text")
    assert "\x1b" not in out
    primary = a.primary
    if primary is not None:
        first = out.splitlines()[0]
        assert first.startswith("PRIMARY") and primary.rule_id in first
        for ev in primary.evidence[:5]:
            if ev.path and ev.line:
                assert f"{ev.path}:{ev.line}" in out
        if primary.rerun:
            assert f"re-run:  {primary.rerun}" in out
        if primary.guide:
            assert "guide:   " in out
        head = out.index(f"{primary.rule_id} {primary.rule_name}")
        for f in a.findings:
            if not f.primary:
                assert out.index(f"{f.rule_id} {f.rule_name}") > head
    if not a.findings:
        assert out.startswith("No problem found.")
    for run in a.runs:
        assert f"run {run.run_id}" in out
    for v in a.frames["compiles"]["pytorch_version"].drop_nulls().unique().to_list():
        assert f"torch {v}" in out
    assert "log damage" in out
    counts = [str(sum(f.severity == s for f in a.findings)) for s in SEVERITIES]
    assert re.findall(r"\d+", out.splitlines()[-1]) == counts


@pytest.mark.parametrize("key", INPUTS)
def test_text_color_is_plain_plus_ansi(key):
    a = get(key)
    colored = render(a, "text", color=True)
    assert "\x1b[" in colored
    assert ANSI.sub("", colored) == render(a, "text")


def test_text_highlights_extracted_values():
    a = case("cuda_triton_index_oob")
    colored = render(a, "text", color=True)
    values = [v for v in a.primary.fields.values() if any(v in ev.text for ev in a.primary.evidence)]
    assert values, "the primary finding has no extracted value in its evidence"
    assert any(re.search(r"\x1b\[[0-9;]*35m" + re.escape(v), colored) for v in values)


def test_text_damage_is_reported():
    a = analyze([REPO / "fixtures" / "damaged" / "truncated_payload"])
    damage = a.frames["damage"]
    assert damage.height
    out = render(a, "text")
    for row in damage.iter_rows(named=True):
        assert f"log damage: {row['kind']} x{row['count']}" in out


# ------------------------------------------------------------------------------------------ json / jsonl
@pytest.mark.parametrize("key", INPUTS)
def test_json_document(key):
    a = get(key)
    doc = json.loads(render(a, "json"))
    jsonschema.Draft202012Validator(document_schema()).validate(doc)
    assert doc["schema"] == DOCUMENT_SCHEMA
    assert doc["findings"] == [f.to_json() for f in a.findings]
    assert doc["summary"]["counts"] == {s: sum(f.severity == s for f in a.findings) for s in SEVERITIES}
    assert doc["summary"]["primary"] == (a.primary.rule_id if a.primary else None)
    for run in doc["runs"]:
        comp = a.frames["compiles"].filter(pl.col("run_id") == run["run_id"])
        proc = a.frames["process"].filter(pl.col("run_id") == run["run_id"])
        compiled = sorted(comp["pytorch_version"].drop_nulls().unique().to_list())
        manifest = [proc["torch"][0]] if proc.height and proc["torch"][0] else []
        assert run["torch_versions"] == (compiled or manifest)  # the trace's version, else the manifest's
        assert len(run["compile_sessions"]) == comp.height
        assert run["exit_code"] == (proc["exit_code"][0] if proc.height else None)
    lines = render(a, "jsonl").splitlines()
    assert len(lines) == len(a.findings)
    validator = jsonschema.Draft202012Validator(finding_schema())
    for line, f in zip(lines, doc["findings"]):
        record = json.loads(line)
        validator.validate(record)
        assert record == f


def test_json_schema_rejects_drift():
    doc = json.loads(render(case("cpp_compile_error"), "json"))
    doc["runs"][0]["undocumented"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(document_schema()).validate(doc)


def test_output_doc_lists_every_json_field():
    doc = (REPO / "docs" / "output.md").read_text(encoding="utf-8")
    keys = set(document_schema()["properties"]) | set(RUN_SCHEMA["properties"]) | set(finding_schema()["properties"])
    keys |= set(RUN_SCHEMA["properties"]["compile_sessions"]["items"]["properties"])
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"docs/output.md does not document {missing}"


# ------------------------------------------------------------------------------------------------ sarif
@functools.lru_cache(maxsize=None)
def sarif_validator():
    return jsonschema.Draft7Validator(json.loads(SARIF_SCHEMA.read_text(encoding="utf-8")))


@pytest.mark.parametrize("key", INPUTS)
def test_sarif_valid_and_consistent(key):
    validator = sarif_validator()
    a = get(key)
    doc = json.loads(render(a, "sarif", source_root=REPO))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    (run,) = doc["runs"]
    assert "runAutomationDetails" not in run and run["automationDetails"]["id"] == "aoti-trace/"
    rules = run["tool"]["driver"]["rules"]
    assert len({r["id"] for r in rules}) == len(rules) == len({f.rule_id for f in a.findings})
    for r in rules:
        for k in ("shortDescription", "fullDescription"):
            assert 0 < len(r[k]["text"]) <= 1024
        assert r["help"]["text"] and r["help"]["markdown"]
    assert len(run["results"]) == len(a.findings)
    for res, f in zip(run["results"], a.findings):
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"] == f.rule_id
        assert res["level"] == {"error": "error", "warning": "warning", "info": "note"}[f.severity]
        assert res["partialFingerprints"]["aotiTrace/v1"] == f.fingerprint
        assert res["message"]["text"]
        loc = repo_location(a, f, REPO)
        if loc is not None:
            phys = res["locations"][0]["physicalLocation"]
            assert phys["artifactLocation"]["uri"].endswith(Path(loc.path).name)
            if loc.line:
                assert phys["region"]["startLine"] == loc.line


def test_sarif_points_at_user_code_and_repo_relative_paths():
    a = case("cpp_compile_error")
    doc = json.loads(render(a, "sarif", source_root=REPO))
    res = doc["runs"][0]["results"][0]
    frame = a.frames["compiles"].filter(pl.col("status") == "failed")["user_frame"][0]
    file, line = frame.rsplit(":", 1)
    doc_user = json.loads(render(a, "sarif", source_root=Path(file).parent))  # the call site's own checkout
    phys = doc_user["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert phys["region"]["startLine"] == int(line)
    assert phys["artifactLocation"]["uri"].endswith(Path(file).name)
    rel = res["relatedLocations"][0]["physicalLocation"]["artifactLocation"]
    assert rel["uriBaseId"] == "SRCROOT" and rel["uri"].startswith("fixtures/cases/cpp_compile_error/")
    assert doc["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"].endswith("/")
    help_md = doc["runs"][0]["tool"]["driver"]["rules"][0]["help"]["markdown"]
    assert a.primary.remedy.strip().splitlines()[0] in help_md and a.primary.guide.split("/")[-1] in help_md


# ------------------------------------------------------------------------------------------------ markdown
@pytest.mark.parametrize("key", INPUTS)
def test_markdown(key):
    a = get(key)
    out = render(a, "markdown")
    first = out.splitlines()[0]
    assert first.startswith("## aoti-trace: ")
    if a.primary:
        assert html.escape(a.primary.title, quote=False).replace("|", "\\|") in first
        if a.primary.rerun:
            assert a.primary.rerun in out
    rows = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert len(rows) == (len(a.findings) + 2 if a.findings else 0)
    for row in rows:
        assert row.endswith("|")
        assert len(re.findall(r"(?<!\\)\|", row)) == 7, row  # no stray cell separators from log text


# ------------------------------------------------------------------------------------------------ html
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "main", "section", "footer", "div",
                "span", "h1", "h2", "h3", "h4", "h5", "h6", "p", "table", "tr", "th", "td", "code", "pre", "ul",
                "ol", "li", "strong", "em", "a", "b", "mark", "details", "summary", "dl", "dt", "dd", "br", "hr",
                "blockquote"}


class TagCollector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(doc: str) -> TagCollector:
    p = TagCollector()
    p.feed(doc)
    p.close()
    return p


@pytest.mark.parametrize("key", INPUTS)
def test_html_self_contained_and_escaped(key):
    a = get(key)
    out = render(a, "html")
    p = parse(out)
    names = {t for t, _ in p.tags}
    assert names <= ALLOWED_TAGS, f"unexpected tags (unescaped text?): {names - ALLOWED_TAGS}"
    for tag, attrs in p.tags:
        assert "src" not in attrs
        assert not any(k.startswith("on") for k in attrs)
        if tag == "a":
            assert re.match(r"https?://|#", attrs.get("href", "")), attrs
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy":
            assert "default-src 'none'" in attrs["content"]
    assert "Content-Security-Policy" in out and "Contains model code and logs" in out
    text = "".join(p.text)
    if a.primary:
        assert a.primary.title in text and a.primary.message.strip()[:200] in text
        if guide_file(a, a.primary):
            assert "What happened" in text  # the sub-guide is rendered
    for f in a.findings:
        assert html.escape(f.message.strip()[:200]) in out


def _hit_rows(out: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r'<tr class="hit">(.*?)</tr>', out)]


def _dump(a: Analysis, name: str) -> list[str]:
    art = a.frames["artifacts"].filter(pl.col("name") == name)
    row = art.row(art.height - 1, named=True)
    return read_payload(row["path"], row["payload_offset"], row["payload_length"]).split("\n")


def test_html_kernel_source_around_device_assert():
    a = case("cuda_triton_index_oob")
    assertion = a.frames["device_asserts"]["assertion"][0]
    wrapper = _dump(a, "inductor_aot_wrapper_code")
    expected = next(ln for ln in wrapper if "device_assert" in ln and assertion in ln)
    hits = _hit_rows(render(a, "html"))
    assert any(h.endswith(expected) for h in hits), hits


def test_html_wrapper_line_of_compiler_error():
    a = case("cpp_compile_error")
    m = re.search(r"\.wrapper\.cpp:(\d+)", a.primary.message)
    expected = _dump(a, "inductor_aot_wrapper_code")[int(m.group(1)) - 1]
    assert any(h == m.group(1) + expected for h in _hit_rows(render(a, "html")))


def test_html_cpu_kernel_check_line():
    a = case("dynamic_dim_unchecked_oob")
    lines = a.frames["lines"]
    ref = lines.filter(pl.col("text").str.contains(r"Exception raised from .*\.kernel\.cpp:\d+"))["text"][0]
    n = int(re.search(r"\.kernel\.cpp:(\d+)", ref).group(1))
    expected = _dump(a, "inductor_aot_kernel_code")[n - 1]
    assert "index out of bounds" in expected
    assert any(h == f"{n}{expected}" for h in _hit_rows(render(a, "html")))


def test_html_evidence_line_highlighted_in_context():
    a = case("cuda_triton_index_oob")
    ev = next(e for e in a.primary.evidence if e.source == "lines")
    raw = Path(ev.path).read_text(encoding="utf-8", errors="replace").splitlines()[ev.line - 1]
    assert f"{ev.line}{raw}" in _hit_rows(render(a, "html"))


@pytest.mark.parametrize("name", ["cpp_compile_error", "cuda_triton_index_oob", "two_rank"])
def test_html_timeline_from_chromium_events(name):
    a = case(name)
    ev = a.frames["events"].filter(pl.col("event") == "chromium_event")
    assert ev.height
    out = render(a, "html")
    assert 'id="timeline"' in out
    bars = re.findall(r'class="tl-bar d\d( failed)?( unfinished)?"', out)
    assert bars
    failed = a.frames["compiles"].filter(pl.col("status") == "failed").height
    assert any(b[0] for b in bars) == bool(failed)
    for trace_file in ev["path"].unique().to_list():
        assert html.escape(trace_file) in out


def test_html_no_findings():
    out = render(case("ok_compile_load_run"), "html")
    assert "No problem found." in out and 'id="findings"' not in out


# ------------------------------------------------------------------------------- markdown (markdown-it-py)
MD_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "pre", "code", "ul", "ol", "li", "strong", "em", "a", "hr",
           "blockquote", "br"}
GUIDES = sorted((REPO / "rules" / "guides").rglob("*.md"))


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.parent.name + "/" + p.name)
def test_markdown_html_renders_real_guides(guide):
    md = guide.read_text(encoding="utf-8")
    out = markdown_to_html(md)
    p = parse(out)
    assert {t for t, _ in p.tags} <= MD_TAGS
    fences = len(re.findall(r"^\s*```", md, re.M))
    assert out.count("<pre>") == fences // 2
    headings = re.findall(r"^(#{1,6}) ", md, re.M)
    assert sum(out.count(f"<h{n}>") for n in range(1, 7)) == len(headings)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab <>&\"'`*#-1.[]()\n:/h\t")), max_size=200))
def test_markdown_html_never_passes_markup_through(md):
    out = markdown_to_html(md)
    p = parse(out)
    for tag, attrs in p.tags:
        assert tag in MD_TAGS
        if tag == "a":
            assert attrs["href"].startswith(("http://", "https://"))
        else:
            assert set(attrs) <= {"class", "start"}
    assert md.count("<") <= out.count("&lt;")


def test_markdown_html_links_and_escapes():
    out = markdown_to_html("[x](javascript:alert(1)) [y](https://e.org/?a=1&b=2) `<b>` **`k`**")
    assert "<a" in out and 'href="https://e.org/?a=1&amp;b=2"' in out
    assert "javascript:" in out and out.count("<a ") == 1
    assert "<code>&lt;b&gt;</code>" in out and "<strong><code>k</code></strong>" in out


def test_render_rejects_unknown_format():
    with pytest.raises(ValueError):
        render(case("ok_compile_load_run"), "xml")
    assert set(FORMATS) == {"text", "json", "jsonl", "sarif", "html", "markdown", "github"}


def test_sample_report_is_from_a_real_fixture():
    sample = (REPO / "docs" / "sample-report.html").read_text(encoding="utf-8")
    name = "cuda_triton_index_oob" if "cuda_triton_index_oob" in CASES else "cpp_compile_error"
    a = case(name)
    assert html.escape(a.primary.title) in sample and a.primary.rule_id in sample
    assert f"runs: {name}" in sample


@pytest.mark.parametrize("trace", ["fixtures/damaged/gz", "fixtures/cases/two_rank", "fixtures/damaged/truncated_payload"])
def test_chromium_frame_matches_read_payload(trace):
    """The ``chromium`` frame (read with one handle per file: cheap on .gz) holds exactly what read_payload returns
    for every chromium event, in the order of ``events``."""
    from aoti_trace.report.common import timelines

    a = analyze([REPO / trace])
    ev = a.frames["events"].filter(pl.col("event") == "chromium_event")
    assert ev.height
    got = a.frames["chromium"]
    assert got.select("path", "lineno").rows() == ev.select("path", "lineno").rows()
    for row, text in zip(ev.rows(named=True), got["payload"].to_list()):
        assert text == read_payload(row["path"], row["payload_offset"], row["payload_length"])
    assert timelines(a)


def test_guide_comes_from_the_rules_folder_the_rule_was_loaded_from(tmp_path, monkeypatch):
    """A rule loaded with --rules DIR shows DIR's guide (the reports once looked only in the built-in library)."""
    from aoti_trace.pipeline import analyze
    from aoti_trace.report import render

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "package_error").mkdir()
    shutil.copy(root / "rules" / "package_error" / "archive-version-mismatch.yaml", tmp_path / "package_error")
    guide = tmp_path / "guides" / "package_error" / "package-error.md"
    guide.parent.mkdir(parents=True)
    guide.write_text("# Our team's guide\n\n## What happened\n\nOur own words about archive versions.\n")
    monkeypatch.chdir(tmp_path)
    a = analyze([root / "fixtures" / "cases" / "archive_version_mismatch"], rules_path=tmp_path)
    assert a.primary is not None and a.primary.rule_id == "AOTI-K003"
    assert a.guides["AOTI-K003"].path == guide
    assert "guide:   guides/package_error/package-error.md" in render(a, "text")
    assert "Our own words about archive versions." in render(a, "html")
    assert "Our own words about archive versions." in render(a, "sarif")
