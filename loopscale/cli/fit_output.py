"""What `loopscale fit` prints: the parameter table of each fit, a joint fit's delta-phi lines and every fit's
conditioning checks with their verdict (`loopscale.fit.verdict.verdict_lines`, the one renderer `compare`, `report`
and the notebook use too); the files it writes (--out, --plot; one per group) are `loopscale.analysis.fit_files`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from loopscale.analysis.fit_files import write_fits
from loopscale.fit.noise_text import noise_lines
from loopscale.fit.result_text import joint_lines, summary_lines
from loopscale.fit.verdict_render import verdict_lines


def write_results(results, out_paths, plot_paths, figures=None, dpi: int = 200) -> int:
    """Print each fit with its conditioning, then write each fit JSON and each figure
    (`analysis.fit_files.write_fits`). `figures`: the table each figure draws (`figure_table`)."""
    figures = figures or [table for _g, table, _r in results]
    for g, _table, result in results:
        print_result(result, g)
        if result.joint:
            for line in joint_lines(result.joint):
                print(line)
        for line in verdict_lines(result.conditioning):
            print(line)
    write_fits(results, out_paths, plot_paths, figures, dpi)
    return 0


def print_result(result, group=None) -> None:
    title = f"{result.law} fit" + (f" — {result.group['column']} = {group}" if group is not None else "")
    t = Table(title=title)
    t.add_column("parameter")
    t.add_column("estimate", justify="right")
    t.add_column("95% CI", justify="right")
    for name, value in result.params.items():
        ci = result.ci95.get(name)
        t.add_row(escape(name), f"{value:.6g}", escape(f"[{ci[0]:.4g}, {ci[1]:.4g}]") if ci else "—")
    console = Console()
    console.print(t)
    for line in summary_lines(result):
        console.print(line, highlight=False, markup=False)  # "[open, 0.61]" is an interval, not a tag
    for line in noise_lines(result.noise):  # the seed sigma, or that the intervals omit seed noise
        console.print(escape(line), highlight=False, soft_wrap=True)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)
