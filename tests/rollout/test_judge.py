"""A judge model as the reward (rollout/judge.py): batched, cached, and a judge that fails is an
error of the episode, never a reward. The judge here is a real HTTP engine on loopback that
answers with scripted text (tests/agent/engine_server.py)."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "agent"))
from engine_server import ScriptedEngineServer, agent_tokenizer  # noqa: E402

from posttrain.agent.framing import single_turn  # noqa: E402
from posttrain.engine.clients.openai import RemoteEngine  # noqa: E402
from posttrain.engine.paged.local import LocalEngine  # noqa: E402
from posttrain.models.tiny import build_tiny_model  # noqa: E402
from posttrain.rollout.envs import Prompt, SingleTurnEnv  # noqa: E402
from posttrain.rollout.judge import JudgeConfig, JudgeError, JudgeReward, parse_score  # noqa: E402
from posttrain.schedule.sampler import GroupJob  # noqa: E402


@pytest.mark.parametrize("answer, reward", [("7", 0.7), (" 10 points", 1.0), ("0", 0.0), ("score: 2.5", 0.25)])
def test_the_first_number_over_the_scale_is_the_reward(answer, reward):
    assert math.isclose(parse_score(answer, 10.0), reward)


@pytest.mark.parametrize("answer", ["no idea", "11", "-1", ""])
def test_an_answer_without_a_score_in_range_is_an_error(answer):
    with pytest.raises(JudgeError):
        parse_score(answer, 10.0)


def _judge(server, tok, **cfg):
    frame, end_id = single_turn(tok)
    return JudgeReward(RemoteEngine(server.url, "judge", timeout=10), tok, frame, end_id,
                       JudgeConfig(model="unused", **cfg))


def test_one_call_per_batch_and_repeats_come_from_the_cache():
    tok = agent_tokenizer()
    server = ScriptedEngineServer(tok, ["7"])
    try:
        judge = _judge(server, tok)
        a, b = Prompt("a", "copy: echo hi", "echo hi"), Prompt("b", "copy: ls", "ls")
        first = judge.score_batch([("echo hi", a), ("echo hi", a), ("ls", b)])
        assert [r.value for r in first] == [0.7, 0.7, 0.7] and server.requests == 1
        again = judge.score_batch([("ls", b), ("cat", b)])
        assert [r.value for r in again] == [0.7, 0.7] and server.requests == 2
        m = judge.metrics()
        assert m["judge_requests"] == 3 and m["judge_cache_hit_rate"] == 2 / 5
        assert judge.judge_s > 0 and m["judge_calls_per_s"] == pytest.approx(3 / judge.judge_s)
    finally:
        server.stop()


def test_a_judge_that_fails_makes_episode_errors_not_rewards():
    tok = agent_tokenizer()
    server = ScriptedEngineServer(tok, ["no idea"])
    frame, end_id = single_turn(tok)
    prompts = [Prompt("p", frame("copy: echo hi"), "echo hi"), Prompt("q", frame("copy: ls"), "ls")]
    try:
        judge = _judge(server, tok)
        env = SingleTurnEnv(prompts, tok, judge, group_size=2, max_tokens=4, stop_token_ids=[end_id], judged=True)
        engine = LocalEngine(build_tiny_model(len(tok), seed=0), tok)
        group, = env.run([GroupJob(0, 0, "p", seed=1)], engine)
        assert [e.status for e in group] == ["verifier_error"] * 2
        assert "no score" in group[0].error
        # the group waited for one judge call, which took the judge's whole time so far
        waited = {e.timings["judge_s"] for e in group}
        assert len(waited) == 1 and waited.pop() >= judge.judge_s > 0
        server.stop()                                       # the judge's server is gone
        group, = env.run([GroupJob(1, 1, "q", seed=2)], engine)     # not in the cache
        assert [e.status for e in group] == ["verifier_error"] * 2 and "judge failed" in group[0].error
    finally:
        server.stop()
