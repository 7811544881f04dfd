"""A validation manifest's pass rates reach the curriculum of `posttrain rl`: from the TOML
config (`[[domains]] manifest`, `[schedule] curriculum`) through the domain's tasks and the
run's scheduler (recipes/rl/domains.py, the path run_rl takes) to the weights its draws follow."""

import json
from collections import Counter

import pytest

from posttrain.recipes.rl.domains import make_scheduler, sandbox_tasks
from posttrain.recipes.rl.config import load_rl_config
from posttrain.schedule.curriculum import group_signal

# successes of 4 manifest episodes per task: learnable, too easy, too hard, learnable
SUCCESSES = [2, 4, 0, 1]


def _config(tmp_path, curriculum: bool):
    path = tmp_path / "rl.toml"
    path.write_text(f'runs_dir = "{tmp_path}"\n[tasks]\nn_eval = 0\n[rollout]\ngroup_size = 4\n'
                    '[[domains]]\nname = "files"\nsource = "terminal-basics"\nn_train = 4\n'
                    f'options = {{ families = ["create-file"] }}\nmanifest = "{tmp_path / "m.json"}"\n'
                    f'[schedule]\ncurriculum = {str(curriculum).lower()}\n')
    return load_rl_config(str(path))


def _draws(cfg, tmp_path, n=2000) -> tuple[list[str], Counter]:
    (ids,) = sandbox_tasks(cfg, tmp_path / "run").domain_ids
    sched = make_scheduler(cfg, [ids])
    return ids, Counter(sched.next().task_id for _ in range(n))


def test_manifest_pass_rates_set_the_curriculum_weights(tmp_path):
    cfg = _config(tmp_path, curriculum=True)
    (ids,) = sandbox_tasks(cfg, tmp_path / "run").domain_ids
    (tmp_path / "m.json").write_text(json.dumps({"version": 1, "tasks": [
        {"id": t, "status": "ok", "difficulty": {"successes": c, "n": 4}} for t, c in zip(ids, SUCCESSES)]}))
    curriculum = make_scheduler(cfg, [ids]).pickers["files"]
    assert [curriculum.pass_rate(i) for i in range(4)] == [c / 4 for c in SUCCESSES]
    ids, counts = _draws(cfg, tmp_path)
    weights = [max(cfg.schedule.floor, group_signal(c / 4, 4)) for c in SUCCESSES]
    for task, w in zip(ids, weights):
        assert counts[task] / 2000 == pytest.approx(w / sum(weights), abs=0.04)
    assert counts[ids[0]] > counts[ids[3]] > 4 * max(counts[ids[1]], counts[ids[2]])


def test_without_the_curriculum_the_same_manifest_samples_uniformly(tmp_path):
    cfg = _config(tmp_path, curriculum=False)
    (ids,) = sandbox_tasks(cfg, tmp_path / "run").domain_ids
    (tmp_path / "m.json").write_text(json.dumps({"version": 1, "tasks": [
        {"id": t, "status": "ok", "difficulty": {"successes": c, "n": 4}} for t, c in zip(ids, SUCCESSES)]}))
    _, counts = _draws(cfg, tmp_path)
    assert max(counts.values()) - min(counts.values()) <= 1
