"""Trackers never cost a run its training: one that fails mid-run is dropped with one warning
and the run goes on; a missing library or a tracker that cannot start stops the run before it
trains, in one line that says what to do."""

import json
import sqlite3
import sys

import pytest
from tracker_stores import mlflow_run, mlflow_series

from posttrain.errors import PosttrainError
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.run import run_rl

RUN = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=4", "tasks.n_eval=0", "tasks.max_tokens=4",
       "policy.sft_steps=0", "policy.vocab_size=300", "rollout.steps=3", "rollout.max_staleness=0",
       "rollout.groups_per_step=1", "rollout.group_size=2", "rollout.overprovision=1",
       "rollout.filter_zero_variance=false"]


def _cfg(tmp_path, *sets):
    return load_rl_config(None, [f'runs_dir="{tmp_path / "runs"}"', 'name="faulty"', *RUN, *sets])


@pytest.mark.needs("mlflow")
def test_a_tracker_that_fails_mid_run_is_dropped_with_one_warning_and_training_goes_on(tmp_path):
    from mlflow import MlflowClient

    db = tmp_path / "store.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()   # MLflow's tables
    with sqlite3.connect(db) as conn:    # from step 1 on the store refuses every metric, as a full disk would
        conn.execute("CREATE TRIGGER full BEFORE INSERT ON metrics WHEN NEW.step >= 1 "
                     "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    cfg = _cfg(tmp_path, 'tracking.backends=["mlflow"]', f'tracking.mlflow_uri="sqlite:///{db}"')
    with pytest.warns(UserWarning, match="tracking: mlflow failed at rl step 1 .*database or disk is full") as caught:
        summary = run_rl(cfg)
    assert len([w for w in caught if "tracking:" in str(w.message)]) == 1
    assert summary["steps"] == 3 and summary["steps_trained"] == 3
    rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [0, 1, 2]                 # the JSONL stays the record
    client, stored = mlflow_run(f"sqlite:///{db}")
    assert mlflow_series(client, stored, "rl/reward_mean") == [(0, rows[0]["reward_mean"])]


@pytest.mark.parametrize("backend,library", [("wandb", "wandb"), ("mlflow", "alembic"), ("trackio", "trackio")])
def test_a_missing_library_names_the_extra_and_leaves_no_run_behind(tmp_path, monkeypatch, backend, library):
    monkeypatch.setitem(sys.modules, library, None)    # how Python marks a module as absent
    cfg = _cfg(tmp_path, f'tracking.backends=["{backend}"]')
    with pytest.raises(PosttrainError, match=rf"{library} is not installed: pip install -c constraints.txt "
                                             rf"-e '.\[{backend}\]'"):
        run_rl(cfg)
    assert not cfg.run_dir.exists()


@pytest.mark.needs("mlflow")
def test_a_tracker_that_cannot_start_stops_the_run_before_it_trains(tmp_path):
    cfg = _cfg(tmp_path, 'tracking.backends=["mlflow"]', 'tracking.mlflow_uri="nosuch://store"')
    with pytest.raises(PosttrainError, match="tracking: mlflow could not start: "):
        run_rl(cfg)
    assert not cfg.run_dir.exists()


def test_a_backend_named_twice_is_a_config_error(tmp_path):
    with pytest.raises(PosttrainError, match="named twice"):
        _cfg(tmp_path, 'tracking.backends=["wandb", "wandb"]')
