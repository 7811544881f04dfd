"""run_episodes' progress hook: told after every turn, every episode counted once."""

from engine_server import agent_tokenizer

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics


def test_progress_is_told_each_turn_and_sums_to_the_episodes(tmp_path):
    tok = agent_tokenizer()
    engine = LocalEngine(build_tiny_model(len(tok), seed=0), tok)
    made = terminal_basics.generate(tmp_path / "tasks", 2, seed=0)
    tasks = [read_task(tmp_path / "tasks" / t.id) for t in made]
    told = []
    cfg = AgentConfig(max_turns=3, max_reply_tokens=8, sandbox_backend="bwrap")
    jobs = [(t, g) for t in tasks for g in range(2)]
    run_episodes(jobs, engine, ChatFramer(tok), SamplingParams(temperature=1.0, seed=5), cfg, progress=told.append)
    assert len(told) == cfg.max_turns + 1 and sum(told) == len(jobs) and min(told) >= 0
