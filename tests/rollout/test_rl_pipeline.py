"""The two loops on a real tiny model: synchronous determinism, the step-0 mismatch,
the staleness bound with async rollouts, and bad input recorded as episode statuses."""

import copy
import json
import os

import pytest

from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.events import EventLog
from posttrain.rollout.pipeline import Pipeline
from posttrain.rollout.single_turn import similarity_reward
from posttrain.schedule.sampler import TaskSampler
from posttrain.train.losses import LOSSES
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Reward


def timing(key: str) -> bool:
    return key.endswith("_s") or "idle" in key or "busy" in key


def _run(make_parts, tmp_path=None, steps=3, algo=None, env_kw=None, **cfg):
    env, model, engine = make_parts(**(env_kw or {}))
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
    rc = RolloutConfig(steps=steps, groups_per_step=2, group_size=env.group_size, **cfg)
    events = EventLog(tmp_path / "events.jsonl" if tmp_path else None)
    pipe = Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0), rc, algo or RLConfig(tis="token"),
                    events)
    rows = []
    pipe.run(lambda step, stats: rows.append(stats))
    events.close()
    return pipe, rows


def test_sync_runs_are_identical_and_step0_mismatch_is_zero(make_parts):
    _, a = _run(make_parts, max_staleness=0)
    _, b = _run(make_parts, max_staleness=0)
    strip = [{k: v for k, v in r.items() if not timing(k)} for r in a]
    assert strip == [{k: v for k, v in r.items() if not timing(k)} for r in b]
    assert a[0]["mismatch_max_abs"] <= 1e-5 and a[0]["mismatch_k3"] <= 1e-10
    assert [r["version"] for r in a] == [1.0, 2.0, 3.0]
    assert all(r["staleness_max"] == 0 for r in a)


def test_async_respects_the_staleness_bound_and_trains_each_group_once(make_parts, tmp_path):
    pipe, rows = _run(make_parts, tmp_path, steps=4, max_staleness=1, workers=2,
                      groups_per_wave=1, env_kw={"chunk_tokens": 2})
    assert len(rows) == 4 and all(r["staleness_max"] <= 1 for r in rows)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").open()]
    assert [e["n"] for e in events] == list(range(1, len(events) + 1))
    trained = [u for e in events if e["event"] == "train" for u in e["uids"]]
    assert len(trained) == len(set(trained)) > 0
    issued = {e["uid"] for e in events if e["event"] == "issue"}
    assert set(trained) <= issued
    assert pipe.version == sum(1 for e in events if e["event"] == "publish")


def test_one_worker_whose_wave_fills_the_bound_does_not_deadlock(make_parts):
    """The worker sleeps once its wave fills every outstanding slot; the trainer taking a
    batch must wake it (this hung before the trainer notified on take)."""
    import threading

    done = []
    t = threading.Thread(target=lambda: done.append(_run(
        make_parts, steps=4, max_staleness=1, workers=1, groups_per_wave=4, overprovision=0)), daemon=True)
    t.start()
    t.join(timeout=60)
    assert done and len(done[0][1]) == 4


def test_async_with_the_engine_in_a_child_process(make_parts, tokenizer):
    """Generation in another process, weights over shared memory: the staleness bound holds,
    step 0 samples from the trainer's own weights, and the sampled versions advance."""
    from posttrain.engine.process import ProcessEngine
    from posttrain.rollout.weights import LockedEngine

    env, model, _ = make_parts()
    with ProcessEngine(model, tokenizer) as child:
        trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
        rc = RolloutConfig(steps=4, groups_per_step=2, group_size=env.group_size, max_staleness=1,
                           workers=1, groups_per_wave=2, overprovision=0)
        pipe = Pipeline(env, LockedEngine(child), trainer, TaskSampler(env.task_ids, 0), rc,
                        RLConfig(tis="token"))
        rows = []
        pipe.run(lambda step, stats: rows.append(stats))
    assert len(rows) == 4 and all(r["staleness_max"] <= 1 for r in rows)
    # Admission lets in only groups that can still be trained in time (one in-order worker).
    assert rows[-1]["groups_dropped_stale_total"] == 0
    assert rows[0]["mismatch_max_abs"] <= 1e-5
    assert pipe.version == 4 and child.policy_version == 4


def test_a_raising_reward_function_is_recorded_and_the_run_goes_on(make_parts):
    def flaky(text, prompt):
        if prompt.id.endswith(("1", "3")):
            raise RuntimeError("boom")
        return Reward(len(text) / 10.0)
    pipe, rows = _run(make_parts, steps=2, max_staleness=0, env_kw={"reward_fn": flaky})
    assert len(rows) == 2 and rows[-1]["finished_verifier_error_total"] > 0
    assert any(r["skipped"] == 0 for r in rows)  # the prompts whose reward works still train


def test_an_episode_past_the_context_window_is_recorded(make_parts):
    env, _, engine = make_parts(max_tokens=127)  # prompt + 127 > 128
    from posttrain.schedule.sampler import GroupJob
    groups = env.run([GroupJob(0, 0, env.task_ids[0], 1)], engine)
    assert {e.status for e in groups[0]} == {"context_overflow"}
    assert all(e.tokens_out == 0 and e.error for e in groups[0])


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_every_loss_trains_through_the_pipeline(make_parts, loss):
    _, rows = _run(make_parts, steps=1, max_staleness=0, algo=RLConfig(loss=loss, tis="sequence"))
    assert rows[0]["skipped"] == 0.0 and rows[0]["grad_norm"] > 0


def test_weight_updates_land_mid_reply_and_tokens_keep_their_versions(make_parts):
    """Chunked replies (one generate call per token) with the trainer publishing after
    every call: each token carries the version that sampled it, and versions only go up
    within an episode. The publishes are interleaved deterministically (a race against a
    thread depends on the machine's load)."""
    import itertools

    from posttrain.rollout.buffer import Group
    from posttrain.schedule.sampler import GroupJob

    env, model, engine = make_parts(chunk_tokens=1, max_tokens=8)
    env.stop_token_ids = []  # every reply runs its full 8 tokens
    jobs = [GroupJob(i, i, env.task_ids[i], 7) for i in range(2)]
    versions, generate = itertools.count(1), engine.generate

    def generate_then_publish(prompts, params):
        completions = generate(prompts, params)
        engine.publish(model, next(versions))
        return completions

    engine.generate = generate_then_publish
    out = env.run(jobs, engine)
    episodes = [e for group in out for e in group]
    sampled = [[v for v, m in zip(e.versions, e.loss_mask) if m] for e in episodes]
    assert all(len(vs) == 8 and vs == sorted(vs) for vs in sampled)
    assert any(len(set(vs)) > 1 for vs in sampled)
    g = Group.of(jobs[0], out[0], 0)
    assert g.version_min == min(min(vs) for vs in sampled[:4]) < g.version_max


def test_async_checkpoint_requeues_in_flight_groups_and_trains_nothing_twice(make_parts, tmp_path):
    """Snapshot an async run mid-way, rebuild the pipeline from the snapshot (as --resume
    does), finish it: no group is trained twice and every group in flight at the snapshot
    is re-queued with its uid."""
    snap = {}

    def keep(step, stats):
        if step == 1:
            snap.update(pipe.state_dict())
    env, model, engine = make_parts()
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
    rc = RolloutConfig(steps=2, groups_per_step=2, group_size=4, max_staleness=1, workers=2,
                       groups_per_wave=1)
    pipe = Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0), rc, RLConfig(tis="token"),
                    EventLog(tmp_path / "a.jsonl"))
    pipe.run(keep)
    before = [json.loads(x) for x in (tmp_path / "a.jsonl").open()][:snap["events"]]
    trained = {u for e in before if e["event"] == "train" for u in e["uids"]}
    issued = {e["uid"] for e in before if e["event"] == "issue"}
    held = {g["job"]["uid"] for g in snap["buffer"]["groups"]} | {j["uid"] for j in snap["sampler"]["requeued"]}
    thrown = {e["uid"] for e in before if e["event"] == "finish" and not e["kept"]}
    thrown |= {u for e in before if e["event"] == "drop" for u in e["uids"]}
    assert issued - trained - thrown <= held  # nothing in flight is lost
    resumed = Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0),
                       rc.model_copy(update={"steps": 4}), RLConfig(tis="token"),
                       EventLog(tmp_path / "b.jsonl"))
    resumed.load_state_dict(snap)
    resumed.run()
    after = [json.loads(x) for x in (tmp_path / "b.jsonl").open()]
    again = [u for e in after if e["event"] == "train" for u in e["uids"]]
    assert len(again) == len(set(again)) and not set(again) & trained
    assert resumed.step == 4 and resumed.version >= snap["version"]


def test_an_async_run_replays_exactly_from_its_recorded_batches(make_parts, tmp_path):
    from posttrain.rollout.replay import replay

    env, model, engine = make_parts()
    rc = RolloutConfig(steps=3, groups_per_step=2, group_size=4, max_staleness=1, workers=2,
                       groups_per_wave=1)
    pipe = Pipeline(env, engine, PolicyTrainer(model, 0, OptimConfig(lr=1e-2)),
                    TaskSampler(env.task_ids, 0), rc, RLConfig(tis="token"), record_dir=tmp_path)
    rows = []
    pipe.run(lambda step, stats: rows.append(stats))
    env2, model2, engine2 = make_parts()  # the same initial weights
    again = Pipeline(env2, engine2, PolicyTrainer(model2, 0, OptimConfig(lr=1e-2)),
                     TaskSampler(env2.task_ids, 0), rc, RLConfig(tis="token"))
    replayed = []
    replay(again, tmp_path, lambda step, stats: replayed.append(stats))
    keys = ["loss", "grad_norm", "mismatch_k3", "mismatch_max_abs", "ess", "entropy",
            "staleness_mean", "reward_mean", "tis_weight_mean"]
    assert [[r[k] for k in keys] for r in replayed] == [[r[k] for k in keys] for r in rows]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs sched_setaffinity and two cores")
def test_the_child_engine_gets_its_own_core_and_the_trainer_fewer_threads(make_parts, tokenizer, tmp_path):
    """engines.pin_cores (auto: single-turn tasks): the engine child on one core, the trainer
    thread on the others with no more torch threads than it has cores; all of it undone when
    the engine closes. Sandbox tasks are not pinned by default."""
    import threading

    import torch

    from posttrain.agent.config import AgentConfig
    from posttrain.recipes.rl.config import load_rl_config
    from posttrain.recipes.rl.engines import rollout_engine
    from posttrain.rollout.envs import InEngineProcess, SandboxEnv

    env, model, _ = make_parts()
    me, before = threading.get_native_id(), os.sched_getaffinity(0)
    runs = f'runs_dir="{tmp_path}"'     # the gate's conformance.jsonl goes here, not into the checkout
    cfg = load_rl_config(None, [runs, 'engines.kind="process"', "threads=2", 'tasks.kind="copy"'])
    threads = torch.get_num_threads()
    torch.set_num_threads(len(before))
    try:
        with rollout_engine(cfg, model, tokenizer, env) as (engine, wrapped):
            child = engine.engine.pid
            assert isinstance(wrapped, InEngineProcess)  # single-turn episodes run in the child
            assert len(os.sched_getaffinity(child)) == 1
            assert os.sched_getaffinity(me) == before - os.sched_getaffinity(child)
            assert torch.get_num_threads() == len(before) - 1
            assert engine.cores == os.sched_getaffinity(child)
        assert os.sched_getaffinity(me) == before and torch.get_num_threads() == len(before)
        sandbox_env = SandboxEnv([], None, AgentConfig(), group_size=2)
        sandbox_tasks = load_rl_config(None, [runs, 'engines.kind="process"'])  # not pinned by default
        with rollout_engine(sandbox_tasks, model, tokenizer, sandbox_env) as (engine, wrapped):
            assert os.sched_getaffinity(engine.engine.pid) == before == os.sched_getaffinity(me)
            assert engine.cores is None and wrapped is sandbox_env
    finally:
        torch.set_num_threads(threads)
    assert (tmp_path / "rl" / "conformance.jsonl").is_file()    # written under tmp_path


def test_single_turn_episodes_run_in_the_engine_process_as_beside_the_trainer(make_parts):
    """InEngineProcess: prompts tokenized, replies sampled, decoded and scored in the engine's
    child; the episodes are those the env gives run in this process over the same engine,
    and a synchronous run trains the same on either."""
    from posttrain.engine.process import ProcessEngine
    from posttrain.rollout.envs import InEngineProcess
    from posttrain.rollout.weights import LockedEngine
    from posttrain.schedule.sampler import GroupJob

    env, model, local = make_parts(chunk_tokens=2)
    jobs = [GroupJob(i, i, env.task_ids[i], 7) for i in range(3)]
    with ProcessEngine(model, env.tokenizer) as child:
        engine = LockedEngine(child)
        remote = InEngineProcess(env, engine)
        here, there = env.run(jobs, engine), remote.run(jobs, engine)
        assert engine.generate_s > 0 and remote.task_ids == env.task_ids
        for a, b in zip([e for g in here for e in g], [e for g in there for e in g]):
            assert (a.tokens, a.versions, a.reward, a.status) == (b.tokens, b.versions, b.reward, b.status)
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= 1e-6

        rc = RolloutConfig(steps=2, groups_per_step=2, group_size=env.group_size, max_staleness=0)
        rows = {}
        for name, (e, eng) in {"here": (env, local), "child": (remote, engine)}.items():
            trainer = PolicyTrainer(copy.deepcopy(model), 0, OptimConfig(lr=1e-2))
            pipe = Pipeline(e, eng, trainer, TaskSampler(env.task_ids, 0), rc, RLConfig(tis="token"))
            rows[name] = []
            pipe.run(lambda step, stats, out=rows[name]: out.append(stats))
    for a, b in zip(rows["here"], rows["child"]):
        assert a.keys() == b.keys()
        assert all(b[k] == pytest.approx(v, rel=1e-4, abs=1e-6) for k, v in a.items() if not timing(k)), a


def test_a_rollout_that_fails_in_the_engine_process_is_an_error_there_and_it_goes_on(make_parts):
    from posttrain.engine.process import EngineProcessError, ProcessEngine
    from posttrain.rollout.envs import InEngineProcess
    from posttrain.rollout.weights import LockedEngine
    from posttrain.schedule.sampler import GroupJob

    env, model, _ = make_parts(reward_fn=lambda text, prompt: Reward(1.0))
    with ProcessEngine(model, env.tokenizer) as child:
        engine = LockedEngine(child)
        with pytest.raises(EngineProcessError, match="bind: cannot send"):
            InEngineProcess(env, engine)  # a lambda does not pickle
        env.reward_fn = similarity_reward
        remote = InEngineProcess(env, engine)
        with pytest.raises(EngineProcessError, match="IndexError"):
            remote.run([GroupJob(0, 999, "nope", 0)], engine)
        assert len(remote.run([GroupJob(1, 0, env.task_ids[0], 0)], engine)[0]) == env.group_size


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs sched_setaffinity and two cores")
def test_rollout_threads_that_wait_on_the_engine_process_run_on_its_core(make_parts):
    """A worker over InEngineProcess mostly waits for the child and then unpickles episodes
    while the child idles: it runs on the child's core, the training thread keeps its own."""
    import threading

    from posttrain.engine.affinity import split_cores
    from posttrain.engine.process import ProcessEngine
    from posttrain.rollout.envs import InEngineProcess
    from posttrain.rollout.weights import LockedEngine

    class Recording(InEngineProcess):
        def run(self, jobs, engine):
            seen.add(frozenset(os.sched_getaffinity(0)))  # 0: the calling thread
            return super().run(jobs, engine)

    env, model, _ = make_parts()
    seen: set = set()
    with ProcessEngine(model, env.tokenizer) as child, split_cores(child.pid) as cores:
        engine = LockedEngine(child)
        engine.cores = cores
        trainer_cores = os.sched_getaffinity(threading.get_native_id())
        rc = RolloutConfig(steps=2, groups_per_step=2, group_size=env.group_size, max_staleness=1)
        pipe = Pipeline(Recording(env, engine), engine, PolicyTrainer(copy.deepcopy(model), 0, OptimConfig()),
                        TaskSampler(env.task_ids, 0), rc, RLConfig())
        pipe.run()
        assert seen == {frozenset(cores)} and os.sched_getaffinity(threading.get_native_id()) == trainer_cores


def test_publishing_follows_a_replaced_parameter(make_parts):
    """publish reuses the model's state dict while its parameters are updated in place, and
    builds it again when one is replaced."""
    import torch

    from posttrain.engine.process import ProcessEngine
    from posttrain.rollout.weights import LockedEngine

    _, model, _ = make_parts()
    with ProcessEngine(model, None) as child:
        engine = LockedEngine(child)
        with torch.no_grad():
            model.lm_head.weight.add_(1.0)
        engine.publish(model, 1)
        assert torch.equal(child._shared.tensors["lm_head.weight"], model.lm_head.weight)
        model.lm_head.weight = torch.nn.Parameter(torch.zeros_like(model.lm_head.weight))
        engine.publish(model, 2)
        assert child.policy_version == 2 and child._shared.tensors["lm_head.weight"].abs().sum() == 0
