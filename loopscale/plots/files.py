"""The files a figure is written to, and writing them: `figure_files` says which files a `--plot PATH` asks for,
`write_figure` writes a drawn figure to them. Nothing here imports matplotlib (a command that draws only with
--plot imports this at its top and matplotlib only when it draws); every file is written atomically
(loopscale/atomic.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loopscale.atomic import atomic_path
from loopscale.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 200  # PNG resolution: print quality (here, not in the registry: a parser taking --dpi loads no matplotlib)


def check_dpi(dpi: int) -> None:
    if not 10 <= dpi <= 1000:
        raise InputError(f"--dpi must be between 10 and 1000; got {dpi}")


def figure_files(path) -> list[Path]:
    """The files a figure asked for at `path` is written to: a .png or .pdf comes with the other beside it (a
    bitmap to look at, a vector file for a paper, as every figure of `plot` and `report`); another format
    (.svg, ...) alone."""
    path = Path(path)
    companion = {".png": ".pdf", ".pdf": ".png"}.get(path.suffix.lower())
    return [path] if companion is None else [path, path.with_suffix(companion)]


def write_figure(fig: Figure, paths: Sequence, dpi: int) -> list[Path]:
    """Write `fig` to each of `paths` in the format its suffix names (PNG at `dpi`), each atomically (never a cut
    file); return the paths. The constrained layout is solved for the first file only and kept for the others:
    the solver measures every tick label, half of a report's drawing time when it ran once per format, and the
    positions it gives are fractions of the figure, the same in every format."""
    paths = [Path(p) for p in paths]
    engine = fig.get_layout_engine()
    try:
        for i, path in enumerate(paths):
            with atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".").lower() or "png")
            if i == 0 and engine is not None:
                fig.set_layout_engine("none")  # positions stay where the first file's solve put them
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)
    return paths
