"""Round callbacks: metrics of one's own, stopping a run, state across a resume, and records."""

from __future__ import annotations

import json

import pytest
import torch

from p2pfl.callbacks import Callback, StopRun
from p2pfl.cli import main
from p2pfl.config import ConfigError
from p2pfl.engine import run
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import skip_plots, small_config, strip_times


class AverageNorm(Callback):
    """The L2 norm of the average model on evaluation rounds."""

    def after_round(self, end):
        if end.evaluating:
            return {"avg_norm": sum(v.square().sum() for v in end.average_model().values())
                    .sqrt().item()}
        return None


class StopAt(Callback):
    """Stops the run once `rounds` rounds are done."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def after_round(self, end):
        if end.t + 1 >= self.rounds:
            raise StopRun(f"reached round {self.rounds}")


class LossSum(Callback):
    """State across rounds: the running sum of the training loss (kept in the checkpoint)."""

    def __init__(self) -> None:
        self.total = 0.0

    def after_round(self, end):
        self.total += end.record["train_loss"]
        return {"loss_sum": self.total}

    def state_dict(self):
        return {"total": self.total}

    def load_state_dict(self, state):
        self.total = state["total"]


def _cfg(**overrides):
    return small_config(**{"rounds": 3, "engine__checkpoint_every": 1, **overrides})


def test_a_metric_callback_adds_its_value_on_evaluation_rounds(tmp_path):
    history = run(_cfg(eval__every=2), tmp_path / "run", callbacks=[AverageNorm()])
    assert ["avg_norm" in r for r in history] == [False, True, True]  # rounds 2 and 3 (last)
    final = torch.load(tmp_path / "run" / "final.pt", weights_only=True)["average_model"]
    norm = sum(v.square().sum() for v in final.values()).sqrt().item()
    assert history[-1]["avg_norm"] == pytest.approx(norm, rel=1e-12)
    assert read_metrics(tmp_path / "run" / METRICS)[-1]["avg_norm"] == history[-1]["avg_norm"]
    record = json.loads((tmp_path / "run" / "callbacks.json").read_text())
    assert [c["class"] for c in record["callbacks"]] == [f"{__name__}.AverageNorm"]


def test_stop_run_ends_after_the_round_with_a_summary_and_checkpoint(tmp_path):
    history = run(_cfg(rounds=5), tmp_path / "run", callbacks=[StopAt(2)])
    assert len(history) == 2 and "test_acc" in history[-1]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"] == "reached round 2" and summary["rounds"] == 2
    assert len(read_metrics(tmp_path / "run" / METRICS)) == 2
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["round"] == 2


def test_callback_state_survives_a_resume(tmp_path):
    whole = run(_cfg(rounds=4), tmp_path / "whole", callbacks=[LossSum()])
    run(_cfg(rounds=2), tmp_path / "part", callbacks=[LossSum()])
    resumed = run(_cfg(rounds=4), tmp_path / "part", resume=True, callbacks=[LossSum()])
    assert strip_times(resumed) == strip_times(whole)
    assert whole[-1]["loss_sum"] == pytest.approx(sum(r["train_loss"] for r in whole),
                                                  rel=1e-12)


def test_a_resume_needs_the_same_callbacks(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    run(_cfg(rounds=2), out, callbacks=[StopAt(5)])
    with pytest.raises(ConfigError, match=r"^callbacks: the callbacks differ .*'rounds'|"
                                          r"^callbacks: the callbacks differ"):
        run(_cfg(), out, resume=True, callbacks=[StopAt(6)])
    with pytest.raises(ConfigError, match="the callbacks differ"):
        run(_cfg(), out, resume=True, callbacks=[AverageNorm()])
    with pytest.raises(ConfigError, match=r"ran with the callbacks .*StopAt.* pass them again"):
        run(_cfg(), out, resume=True)
    skip_plots(monkeypatch)
    assert main(["resume", str(out), "--set", "rounds=3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass them again" in err
    assert len(run(_cfg(), out, resume=True, callbacks=[StopAt(5)])) == 3
    other = tmp_path / "plain"
    run(_cfg(rounds=2), other)
    with pytest.raises(ConfigError, match="the callbacks differ"):
        run(_cfg(), other, resume=True, callbacks=[AverageNorm()])


def test_a_metric_name_the_record_has_is_refused(tmp_path):
    class Clobber(Callback):
        def after_round(self, end):
            return {"test_acc": 1.0}

    with pytest.raises(ValueError, match="Clobber returned 'test_acc', which the round's record "
                                         "already has"):
        run(_cfg(), tmp_path / "run", callbacks=[Clobber()])


def test_something_that_is_not_a_callback_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="^callbacks: expected p2pfl.Callback objects, got "
                                          "function"):
        run(_cfg(), tmp_path / "run", callbacks=[lambda end: None])
