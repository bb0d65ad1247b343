"""`aoti-trace inspect PKG.pt2`: what a package holds and what it needs, read without loading it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from aoti_trace.cli import cli
from aoti_trace.cli.analyze import write_output
from aoti_trace.cli.options import format_option, out_option

if TYPE_CHECKING:
    from aoti_trace.ingest.package.reader import Issue, PackageInfo
    from aoti_trace.run.host import HostInfo


@cli.command("inspect")
@click.argument("package", type=click.Path(dir_okay=True, path_type=str))
@format_option(["text", "json"], "text", help="text: tables; json: the PackageInfo record (schema aoti-trace.package/v1)")
@out_option("write the result here instead of stdout")
def inspect_cmd(package: str, fmt: str, out: Path | None) -> None:
    """Inspect a .pt2 package: device metadata, inputs, constants, weights, custom ops, kernels."""
    from aoti_trace.run import host as host_mod
    from aoti_trace.ingest.package.reader import compare_with_host, inspect_package

    info = inspect_package(package)  # PackageError -> one line, exit 2
    h = host_mod.host_info()
    derived = {m.name: compare_with_host(m, h) for m in info.models}
    if fmt == "json":
        data = info.to_json()
        data["host"] = h.to_dict()
        for m in data["models"]:
            m["host_issues"] = [i.model_dump(mode="json") for i in derived[m["name"]]]
        write_output(json.dumps(data, indent=2) + "\n", out)
        return
    write_output(render_text(info, derived, h), out)


def render_text(info: PackageInfo, derived: dict[str, list[Issue]], h: HostInfo) -> str:
    """Rich tables, rendered to a string (no colour when not a terminal)."""
    import io

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    class Table(RichTable):  # every cell is plain text: '[s, 8]' is not rich markup
        def add_row(self, *cells: str) -> None:  # type: ignore[override]
            super().add_row(*(escape(c) for c in cells))

    def fmt(xs: Sequence[int | None]) -> str:
        return "[" + ", ".join("s" if x is None else str(x) for x in xs) + "]"

    console = Console(file=io.StringIO(), record=True, width=120, force_terminal=False, color_system=None)
    console.print(f"{info.path}  {info.bytes} bytes, {info.entries} entries, "
                  f"format={info.archive_format} version={info.archive_version} prefix={info.prefix or '(none)'}",
                  markup=False)
    for issue in info.issues:
        console.print(f"  ! {issue.kind}: {issue.detail}", markup=False)
    for m in info.models:
        t = Table(title=f"model {m.name!r}", show_header=False, title_justify="left")
        t.add_column("fact", style="bold")
        t.add_column("value")
        for k, v in m.metadata.items():
            t.add_row(k, v if v != "" else "''")
        t.add_row("inputs / outputs / constants", f"{m.num_inputs} / {m.num_outputs} / {m.num_constants}")
        t.add_row("weights", f"{m.weights_format}" + "".join(f"\n{w.entry} ({w.bytes} bytes)" for w in m.weight_files))
        if m.so_entry:
            t.add_row(".so", f"{m.so_entry} ({m.so_bytes} bytes, {m.so_machine or '?'})")
        if m.extern_ops:
            t.add_row("extern ops", "\n".join(f"{o.target}" + (" (torch.library.custom_op)" if o.custom_op else "")
                                              for o in m.extern_ops))
        if m.cxx:
            t.add_row("compiler", m.cxx)
        console.print(t)
        if m.inputs:
            ti = Table(title="inputs (from check_input_N in the wrapper)", title_justify="left")
            for col in ("#", "name", "dtype", "device", "sizes", "strides", "dynamic ranges"):
                ti.add_column(col)
            for i in m.inputs:
                rng = ", ".join(f"dim {r.dim}: [{'-inf' if r.min is None else r.min}, {'inf' if r.max is None else r.max}]"
                                for r in i.ranges)
                ti.add_row(str(i.index), i.name or "", i.dtype or "", i.device or "", fmt(i.sizes), fmt(i.strides), rng)
            console.print(ti)
        if m.constants:
            tc = Table(title="constants", title_justify="left")
            for col in ("name", "original FQN", "dtype", "device", "shape", "bytes"):
                tc.add_column(col)
            for c in m.constants:
                tc.add_row(c.name or "", c.original_fqn or "", c.dtype or "", c.device or "",
                           str(c.shape) if c.shape is not None else "", str(c.data_size or ""))
            console.print(tc)
        if m.kernels:
            console.print("kernels: " + ", ".join(k.name for k in m.kernels), markup=False)
        for a in m.oob_asserts:
            console.print(f"  bound check in {a['kernel']}: \"{a['text']}\" ({a['entry'].rsplit('/', 1)[-1]}:{a['line']})",
                          markup=False, soft_wrap=True)
        problems = m.issues + derived.get(m.name, [])
        if problems:
            console.print("[bold]problems[/bold]")
            for p in problems:
                console.print(f"  ! {p.kind}: {p.detail}", markup=False)
        else:
            console.print("problems: none found")
    console.print(f"host: torch {h.torch_version} (cuda: {h.torch_cuda}), {h.machine}, GPUs: {h.gpu_count}, "
                  f"CPU flags: {' '.join(h.cpu_flags or [])}", markup=False)
    from aoti_trace.report.text import visible

    return visible(console.export_text())  # package text never drives the terminal (as in the text report)
