"""What the demo says about its result, by hand (issue 58, loopscale/demo.py): the README sentence from a demo.json
(minutes, phi, the verdict word, the interval and its width, or the verdict's own reason when the interval is
open), the console's rival form only below validate's -4 AICc, the sweep's overrides in order, and validate's
summary (the lowest-AICc form whose law is not the fit's own). Records written here; nothing trained."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from loopscale import demo
from loopscale.fit.validation.record import FoldResult, ValidationRecord, Verdict


def summary(interval=(0.412, 0.538), measured=True, line="phi measured: phi = 0.475 [0.412, 0.538]"):
    verdict = {"line": line, "measured": measured, "phi": 0.47549, "interval": interval, "interval_name": "profile"}
    return {"verdict": verdict, "wall_time_s": 1234.0, "n_runs": 36, "n_trained": 12, "conditioning_misses": []}


def test_the_readme_sentence_gives_minutes_phi_the_verdict_and_the_intervals_width():
    assert demo.readme_sentence(summary()) == (
        'Measured on 2 CPU cores (20.6 min): **phi = 0.475**, verdict **"phi measured"**: the 95% profile interval '
        "[0.412, 0.538] is 0.126 wide; the published recipes need <= 0.16."
    )
    open_end = summary((0.3, None), False, "not measured: phi's profile interval is open above")
    assert demo.readme_sentence(open_end) == (
        'Measured on 2 CPU cores (20.6 min): **phi = 0.475**, verdict **"not measured"**: phi\'s profile interval '
        "is open above."
    )
    assert demo.readme_sentence(summary(None, False, "not measured: no interval"))[-14:] == ": no interval."


def test_a_looped_logn_demo_says_the_size_its_phi_is_read_at():
    """phi under looped-logn is the exponent at N_ref (the geometric N_c of the runs): the README sentence and the
    console's result line name it, and the law; r^phi's phi, every size's, names none."""
    s = summary()
    s["verdict"]["N_ref"] = 1e5
    s.update(law="looped-logn", conditioning_misses=[])
    assert demo.readme_sentence(s).startswith(
        'Measured on 2 CPU cores (20.6 min): **phi = 0.475 at N_ref = 1e+05**, verdict **"phi measured"**: the 95% '
    )
    assert "phi = 0.475 at N_ref = 1e+05 (looped-logn) from 36 runs; 12 jobs trained now" in _printed(s)
    assert "N_ref" not in demo.readme_sentence(summary()) and "N_ref" not in _printed({**summary(), "law": "looped"})


def _printed(s) -> str:
    out = io.StringIO()
    demo._print_result(s, None, Console(file=out, width=300, color_system=None))
    return out.getvalue()


@pytest.mark.parametrize("daicc, shown", [(-4.0, False), (-4.01, True), (3.0, False)])
def test_the_console_names_the_preferred_rival_only_below_minus_four(daicc, shown):
    s = summary()
    rival = {"form": "per-r multipliers", "law": "looped-free", "daicc": daicc, "phi": 0.4012}
    s["validation"] = {"line": "the law predicts ...", "flags": [], "best_rival": rival}
    text = _printed(s)
    assert "phi = 0.475 from 36 runs; 12 jobs trained now, 20.6 min in all" in text
    assert "validate: the law predicts ..." in text
    assert (f"the runs prefer per-r multipliers (AICc {daicc:+.1f}, phi = 0.401): validate.json" in text) == shown
    assert "conditioning: every target met" in text


def test_the_demo_sweeps_overrides_put_the_users_last():
    settings = demo.DemoSettings(overrides=["model.r=1,2"], data_dir="/d", seeds=1)
    assert demo._overrides(settings, demo.Path("runs/x"), 3) == [
        "experiment=isodepth_cpu_demo",
        "runs_dir=runs/x",
        "trainer.progress=false",
        "trainer.num_threads=3",
        "data.data_dir=/d",
        "model.r=1,2",
    ]
    assert demo._overrides(demo.DemoSettings(seeds=1), demo.Path("r"), 1)[-1] == "trainer.num_threads=1"
    d = demo.DemoSettings()
    assert (d.n_bootstrap, d.seed, d.workers, d.threads_per_worker, str(d.out_dir)) == (200, 0, 0, 0, "runs/demo")
    assert (d.seeds, d.law) == (2, "looped-logn")  # the demo's design: two seeds, phi at N_ref
    assert demo._overrides(d, demo.Path("r"), 1)[-2:] == ["trainer.num_threads=1", "seed=0,1"]
    seeded = demo._overrides(demo.DemoSettings(overrides=["model.r=1,2"], seeds=3), demo.Path("r"), 1)
    assert seeded[-2:] == ["seed=0,1,2", "model.r=1,2"]  # --seeds K: seed=0..K-1, the user's overrides still last


def test_validates_summary_is_the_lowest_aicc_form_of_another_law():
    forms = [
        {"label": "looped", "law": "looped"},
        {"label": "looped (MSE)", "law": "looped"},  # the fit's own law refitted: no rival
        {"label": "per-r multipliers", "law": "looped-free"},
        {"label": "E pinned", "law": "looped-pinned-e"},
        {"label": "N x D", "law": None},
    ]
    aicc = [-10.0, -30.0, -13.5, -12.0]
    results = [
        FoldResult(
            form=i,
            fold=0,
            ok=True,
            params={"phi": [0.45, 0.44, 0.42, None][i]} if i != 3 else {},
            information={"aicc": a},
        )
        for i, a in enumerate(aicc)
    ]
    record = ValidationRecord(
        forms=forms,
        folds=[{"kind": "full", "label": "all rows"}],
        results=results,
        verdict=Verdict(line="the law predicts ...", flags=["f1"]),
    )
    assert demo.validation_summary(record) == {
        "line": "the law predicts ...",
        "flags": ["f1"],
        "best_rival": {"form": "per-r multipliers", "law": "looped-free", "daicc": -3.5, "phi": 0.42},
    }


def test_the_run_summary_records_the_law_and_seeds_the_console_names():
    """demo.json's record of a looped-logn demo at two seeds says so, and the console's result line, read from that
    same record, names the law beside N_ref."""
    settings = demo.DemoSettings(law="looped-logn", seeds=2, overrides=["model.r=1,2"])
    record = demo.run_summary(settings, (2, 1), 32, [], 88, {"train": 10.0})
    assert (record["law"], record["seeds"], record["n_jobs"], record["n_runs"]) == ("looped-logn", 2, 32, 88)
    assert (record["workers"], record["threads_per_worker"], record["overrides"]) == (2, 1, ["model.r=1,2"])
    assert record["train_flops"] == 0 and record["train_flops_per_s"] is None  # nothing trained now
    s = summary()
    s["verdict"]["N_ref"] = 1e5
    text = _printed({**record, **{k: s[k] for k in ("verdict", "wall_time_s", "conditioning_misses")}})
    assert "phi = 0.475 at N_ref = 1e+05 (looped-logn) from 88 runs; 0 jobs trained now" in text
