"""Domains in the `posttrain rl` config: tasks per domain, the scheduler over them, and
bad input (shares, a domain with no usable task, an unmeetable quota, a foreign manifest)."""

import json
import logging

import pytest

from posttrain.errors import ConfigError
from posttrain.recipes.rl.domains import make_scheduler, sandbox_tasks
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.config import DomainConfig
from posttrain.schedule.sampler import TaskSampler
from posttrain.schedule.scheduler import Scheduler


def config(tmp_path, *domains):
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', "tasks.n_eval=0"])
    return cfg.model_copy(update={"domains": [DomainConfig(**d) for d in domains]})


def two(tmp_path, **b):
    a = {"name": "files", "source": "terminal-basics", "share": 0.75, "n_train": 6,
         "options": {"families": ["create-file", "make-dir"]}}
    return config(tmp_path, a, {"name": "text", "source": "terminal-basics", "share": 0.25, "n_train": 4,
                                "options": {"families": ["find-word"]}, **b})


def manifest(path, entries):
    path.write_text(json.dumps({"version": 1, "tasks": [
        {"id": i, "status": s, "difficulty": {"successes": c, "n": 4}} for i, s, c in entries]}))
    return str(path)


def test_domains_build_tasks_and_a_scheduler(tmp_path):
    cfg = two(tmp_path, episode_timeout_s=5.0)
    tasks = sandbox_tasks(cfg, tmp_path / "run")
    train, held = tasks.train, tasks.held
    assert len(train) == 10 and held == []
    assert all(t.config.agent.timeout_sec <= 5.0 for t in train[6:])
    sched = make_scheduler(cfg, tasks.domain_ids)
    assert isinstance(sched, Scheduler)
    jobs = [sched.next() for _ in range(8)]
    assert [j.domain for j in jobs].count("files") == 6
    assert all(j.task_id.startswith("text-") for j in jobs if j.domain == "text")


def test_domains_read_from_toml_tables(tmp_path):
    path = tmp_path / "rl.toml"
    path.write_text('[[domains]]\nname = "a"\nsource = "terminal-basics"\nshare = 0.7\n'
                    '[[domains]]\nname = "b"\nsource = "/tasks/b"\nshare = 0.3\nsandbox_slots = 8\n')
    cfg = load_rl_config(str(path))
    assert [(d.name, d.share, d.sandbox_slots) for d in cfg.domains] == [("a", 0.7, None), ("b", 0.3, 8)]
    with pytest.raises(ConfigError, match="domains.0.bogus"):
        load_rl_config(None, ['domains=[{name="a", source="x", bogus=1}]'])


def test_the_legacy_tasks_section_is_one_domain(tmp_path):
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"'])
    assert isinstance(make_scheduler(cfg, [["a", "b"]]), TaskSampler)
    cur = load_rl_config(None, ["schedule.curriculum=true"])
    sched = make_scheduler(cur, [["a", "b"]])
    assert isinstance(sched, Scheduler) and sched.next().domain == "default"


def test_shares_that_do_not_sum_to_one_are_normalised_with_a_warning(tmp_path, caplog):
    cfg = two(tmp_path)
    cfg.domains[0].share, cfg.domains[1].share = 3.0, 1.0
    ids = sandbox_tasks(cfg, tmp_path / "run").domain_ids
    with caplog.at_level(logging.WARNING):
        sched = make_scheduler(cfg, ids)
    assert "normalised" in caplog.text and sched.batch.shares == {"files": 0.75, "text": 0.25}
    cfg.domains[0].share = cfg.domains[1].share = 0.0
    with pytest.raises(ConfigError, match="every share is 0"):
        make_scheduler(cfg, ids)


def test_manifest_exclusions_foreign_manifests_and_unmeetable_quotas(tmp_path):
    cfg = two(tmp_path)
    ids = sandbox_tasks(cfg, tmp_path / "run").domain_ids
    text = ids[1]
    cfg.domains[1].manifest = manifest(tmp_path / "m.json", [(text[0], "ok", 2), (text[1], "flaky", 2),
                                                              (text[2], "hackable", 1), (text[3], "ok", 4)])
    sched = make_scheduler(cfg, ids)
    assert sched.pickers["text"].usable == [0, 3]
    cfg.domains[1].include = ["ok", "flaky"]
    assert make_scheduler(cfg, ids).pickers["text"].usable == [0, 1, 3]
    cfg.domains[1].manifest = manifest(tmp_path / "b.json", [(t, "broken", 0) for t in text])
    with pytest.raises(ConfigError, match="no usable task"):
        make_scheduler(cfg, ids)
    cfg.domains[1].manifest = manifest(tmp_path / "o.json", [("other-0001", "ok", 2)])
    with pytest.raises(ConfigError, match="another task set"):
        make_scheduler(cfg, ids)
    cfg.domains[1].manifest = None
    cfg.domains[1].sandbox_slots = 2  # a group of 4 episodes needs 4 slots at once
    with pytest.raises(ConfigError, match="could never run"):
        make_scheduler(cfg, ids)


def test_an_unknown_source_is_a_clear_error(tmp_path):
    cfg = config(tmp_path, {"name": "x", "source": "no-such-suite"})
    with pytest.raises(ConfigError, match="neither a directory nor a built-in suite"):
        sandbox_tasks(cfg, tmp_path / "run")


def test_the_example_domains_config_loads():
    cfg = load_rl_config("examples/rl_domains.toml")
    assert [d.name for d in cfg.domains] == ["files", "text"] and cfg.schedule.curriculum


def test_suite_domains_take_the_suites_own_knobs(tmp_path):
    cfg = config(tmp_path, {"name": "fin", "source": "finance", "n_train": 2,
                            "options": {"tokens": 1000, "families": ["lookup", "growth"]}},
                 {"name": "tools", "source": "terminal-tools", "n_train": 2,
                  "options": {"families": ["jq-select"]}})
    train = sandbox_tasks(cfg, tmp_path / "run").train
    assert [t.config.metadata["family"] for t in train] == ["lookup", "growth", "jq-select", "jq-select"]
    assert [t.domain for t in train] == ["finance", "finance", "terminal-tools", "terminal-tools"]
    bad = config(tmp_path, {"name": "fin", "source": "finance", "options": {"tokens": 5}})
    with pytest.raises(ConfigError, match="domain 'fin': knob tokens"):
        sandbox_tasks(bad, tmp_path / "run2")


def test_the_mixture_preset_loads_four_suites_in_exact_integer_shares():
    cfg = load_rl_config("examples/rl_mixture.toml")
    b = cfg.rollout.groups_per_step
    assert {d.source for d in cfg.domains} == {"terminal-basics", "terminal-tools", "finance", "longctx"}
    assert all(abs(d.share * b - round(d.share * b)) < 1e-9 for d in cfg.domains)


def test_the_tasks_section_builds_what_the_suite_writes_itself(tmp_path):
    """[tasks] is the implicit domain "train": the same tasks, seeds and order as terminal-basics' own
    generate, and the held-out split once, from seed + 1."""
    from posttrain.tasks.suites import terminal_basics

    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', "seed=3", "tasks.n_train=5", "tasks.n_eval=2"])
    tasks = sandbox_tasks(cfg, tmp_path / "run")
    train = terminal_basics.generate(tmp_path / "own" / "train", 5, 3, "train")
    held = terminal_basics.generate(tmp_path / "own" / "heldout", 2, 4, "heldout")
    assert [(t.id, t.instruction) for t in tasks.train] == [(t.id, t.instruction) for t in train]
    assert [(t.id, t.instruction) for t in tasks.held] == [(t.id, t.instruction) for t in held]
    assert [t.path for t in tasks.train] == [tmp_path / "run" / "tasks" / "train" / t.id for t in train]
    assert tasks.domain_ids == [[t.id for t in train]]


def test_a_directory_domain_is_read_once(tmp_path):
    import shutil

    src = tmp_path / "src"
    sandbox_tasks(config(tmp_path, {"name": "gen", "source": "terminal-basics", "n_train": 3}), src)
    cfg = config(tmp_path, {"name": "dir", "source": str(src / "tasks" / "gen")},
                 {"name": "more", "source": "terminal-basics", "n_train": 2})
    ids = sandbox_tasks(cfg, tmp_path / "run").domain_ids
    shutil.rmtree(src)                       # the scheduler counts the tasks it is given
    sched = make_scheduler(cfg, ids)
    assert [len(sched.domains[d].task_ids) for d in ("dir", "more")] == [3, 2]


def test_copy_prompts_take_no_domains():
    with pytest.raises(ConfigError, match="single-turn prompts"):
        load_rl_config(None, ['tasks.kind="copy"', 'domains=[{name="a", source="terminal-basics"}]'])
