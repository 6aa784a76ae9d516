"""The files `loopscale validate --out X.json` writes: X.json (the record), X.md (its Markdown) and X.png (the
held-out figure), every path checked before the first fit (a .json path, writable, none an input), then the figure
drawn and all three written together or none."""

from __future__ import annotations

from pathlib import Path

from loopscale.atomic import atomic_paths, check_outputs_apart, check_writable
from loopscale.errors import InputError
from loopscale.fit.validation.record import ValidationRecord
from loopscale.plots.validation import held_out_figure


def validation_outputs(out: str, fit_path: str, tables: list[Path]) -> list[Path]:
    """[X.json, X.md, X.png] for --out X.json, checked: writable, none the fit or an input table."""
    out = Path(out)
    if out.suffix.lower() != ".json":
        raise InputError(f"--out must name a .json file (the .md and .png go beside it); got {out}")
    outputs = [out, out.with_suffix(".md"), out.with_suffix(".png")]
    check_outputs_apart(
        [("--out", p) for p in outputs], [("the fit", Path(fit_path))] + [("the input table", p) for p in tables]
    )
    for path in outputs:
        check_writable(path, "--out")
    return outputs


def write_validation(record: ValidationRecord, text: str, outputs: list[Path]) -> None:
    """The record as JSON, its Markdown `text` and its held-out figure at `outputs` (`validation_outputs`)."""
    figure = held_out_figure(record)  # drawn before anything is written
    with atomic_paths(*outputs) as (tmp_json, tmp_md, tmp_png):
        record.write_json(tmp_json)
        tmp_md.write_text(text + "\n")
        figure.savefig(tmp_png, dpi=150, format="png")
