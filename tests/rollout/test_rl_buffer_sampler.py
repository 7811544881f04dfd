"""Buffer filtering/staleness, sampler determinism and re-queueing, staleness stats."""

from posttrain.rollout.buffer import Buffer, Group
from posttrain.rollout.stats import staleness_stats
from posttrain.schedule.sampler import TaskSampler
from posttrain.types import Episode


def _ep(uid, reward, versions=(0,), status="ok"):
    e = Episode("t", uid, reward=reward, status=status)
    e.append([1], sampled=False)
    for v in versions:
        e.append([2], sampled=True, logprobs=[-1.0], version=v)
    return e


def _group(sampler, uid, rewards, versions=(0,)):
    return Group.of(sampler.job(uid), [_ep(uid, r, versions) for r in rewards], 0)


def test_buffer_filters_zero_variance_and_drops_stale():
    s = TaskSampler(["a", "b", "c"], seed=1)
    buf = Buffer()
    assert not buf.put(_group(s, 0, [1.0, 1.0]))           # all pass: no signal
    assert buf.put(_group(s, 2, [0.0, 1.0], versions=(3,)))
    assert buf.put(_group(s, 1, [0.0, 1.0], versions=(1, 3)))  # partial rollout: min version 1
    assert buf.stats.filtered == 1 and [g.uid for g in buf.groups] == [1, 2]
    assert len(buf.drop_stale(version=3, max_staleness=1)) == 1   # 3 - 1 > 1
    assert [g.uid for g in buf.take(5)] == [2] and len(buf) == 0


def test_without_the_filter_flat_groups_are_kept_but_not_all_errored_ones():
    s = TaskSampler(["a", "b"], seed=1)
    buf = Buffer()
    assert buf.put(_group(s, 0, [1.0, 1.0]), need_signal=False)
    errored = Group.of(s.job(1), [_ep(1, 0.0, status="infra_error")] * 2, 0)
    assert not buf.put(errored, need_signal=False)
    assert [g.uid for g in buf.groups] == [0] and buf.stats.filtered == 1


def test_errored_episodes_are_not_trained_and_do_not_make_signal():
    s = TaskSampler(["a"], seed=0)
    g = Group.of(s.job(0), [_ep(0, 0.0), _ep(0, 0.0, status="verifier_error")], 0)
    assert len(g.trainable) == 1 and not g.has_signal()
    back = Group.from_dict(g.to_dict())
    assert back.episodes[1].status == "verifier_error" and back.episodes[0].tokens == [1, 2]


def test_sampler_is_a_function_of_seed_and_uid_and_requeues_first():
    a, b = TaskSampler(list("abcde"), seed=3), TaskSampler(list("abcde"), seed=3)
    jobs = [a.next() for _ in range(12)]
    assert jobs == [b.job(u) for u in range(12)]
    assert sorted(j.task_id for j in jobs[:5]) == list("abcde")  # each epoch is a permutation
    a.requeue([jobs[3], jobs[1]])
    assert [a.next().uid for _ in range(3)] == [1, 3, 12]
    c = TaskSampler(list("abcde"), seed=0)
    c.load_state_dict(a.state_dict())
    assert c.next() == a.next()


def test_staleness_histogram_and_partial_rollouts():
    eps = [_ep(0, 0.0, versions=(2, 3)), _ep(0, 0.0, versions=(3, 3))]
    s = staleness_stats(eps, version=3, max_staleness=1)
    assert s["staleness_hist_0"] == 0.75 and s["staleness_hist_1"] == 0.25
    assert s["staleness_max"] == 1.0 and s["partial_rollout_frac"] == 0.5


def test_per_episode_time_cap_lowers_only_longer_agent_timeouts():
    import random

    from posttrain.rollout.envs import capped
    from posttrain.tasks.suites.terminal_basics import FAMILIES, make_task

    task = make_task("t", FAMILIES["make-dir"](random.Random(0)))  # agent timeout 60 s
    assert capped(task, 5.0).config.agent.timeout_sec == 5.0
    assert capped(task, 600.0) is task and capped(task, None) is task
    assert task.config.agent.timeout_sec == 60.0
