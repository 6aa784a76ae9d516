"""Three small promises of the commands (issue 58): loopscale/cli/data.py (every flag left out is the data config's
default; each flag given reaches its field; pack's --seq-len is not a data field), loopscale/cli/collect.py (a
sweep that is no directory is one line, exit 2, nothing written) and loopscale/plots/registry.py (which figures a
runs fit and a curves fit get, in rank order, and every file `save_figures` may write, PNG then PDF). No corpus
read, nothing drawn."""

from __future__ import annotations

from pathlib import Path

from loopscale.cli import build_parser
from loopscale.cli.data import config_from_args
from loopscale.config.schema import DataConfig
from loopscale.plots import registry
from support.cli import run_cli


def _data(*argv):
    return config_from_args(build_parser("data").parse_args(["data", *argv]))


def test_data_flags_left_out_are_the_configs_defaults_and_given_ones_reach_their_field():
    assert _data("prepare") == DataConfig()
    assert _data("pack", "--seq-len", "256") == DataConfig()  # seq_len is the model's, not a data field
    cfg = _data(
        "pack", "--seq-len", "64", "--source", "text", "--path", "c.txt", "--val-fraction", "0.2", "--split-seed",
        "7", "--vocab-size", "512", "--token-dtype", "uint32", "--streaming", "--max-documents", "9", "--packing",
        "published", "--num-proc", "3", "--data-dir", "d", "--text-column", "body", "--tokenizer", "gpt2",
    )  # fmt: skip
    assert (cfg.source, cfg.path, cfg.val_fraction, cfg.split_seed, cfg.vocab_size, cfg.token_dtype) == (
        "text",
        "c.txt",
        0.2,
        7,
        512,
        "uint32",
    )
    assert (cfg.streaming, cfg.max_documents, cfg.packing, cfg.num_proc, cfg.data_dir, cfg.text_column) == (
        True,
        9,
        "published",
        3,
        "d",
        "body",
    )
    assert cfg.tokenizer == "gpt2" and cfg.hf_split == "train"


def test_collect_and_status_refuse_a_sweep_that_is_no_directory(tmp_path):
    file = tmp_path / "runs.csv"
    file.write_text("x\n")
    for command in ("collect", "status"):
        res = run_cli([command, str(file)])
        assert (res.returncode, res.stdout) == (2, "")
        assert res.stderr.strip() == f"loopscale {command}: error: {file} is not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]


def test_each_fit_kind_gets_its_figures_in_rank_order_and_every_file_is_known_beforehand():
    assert registry.figure_names("runs") == (
        "iso_flop",
        "collapse",
        "phi_profile",
        "residuals",
        "delta_phi",
        "loop_gap",
        "compute_optimal",
    )
    assert registry.figure_names("curves") == ("phi_profile", "loss_curves")
    assert registry.FIGURE_NAMES == registry.figure_names("runs") + ("loss_curves",)
    paths = registry.figure_paths(Path("out"), prefix="tb.")
    assert paths[:3] == [
        ("a figure", Path("out/tb.iso_flop.png")),
        ("a figure", Path("out/tb.iso_flop.pdf")),
        ("a figure", Path("out/tb.collapse.png")),
    ]
    assert len(paths) == 2 * len(registry.FIGURE_NAMES) and registry.FORMATS == ("png", "pdf")


def test_a_zero_given_is_checked_not_dropped_for_the_default(tmp_path):
    for flag, message in (("--val-fraction", "val_fraction=0.0 must be in (0, 1)"),
                          ("--max-documents", "max_documents=0 must be a finite number > 0")):  # fmt: skip
        res = run_cli(["data", "prepare", flag, "0", "--data-dir", str(tmp_path / "cache")])
        assert (res.returncode, res.stdout) == (2, "") and message in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []
