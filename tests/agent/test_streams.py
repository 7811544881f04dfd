"""With checkpoints on, each episode samples on its own stream: what it draws does not depend
on which episodes share its batch, so one resumed in another batch continues as it would have."""

from engine_server import agent_tokenizer

from posttrain.agent.chat import ChatFramer
from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics


def _run(jobs, engine, framer, store):
    cfg = AgentConfig(max_turns=2, max_reply_tokens=12, sandbox_backend="bwrap")
    return run_episodes(jobs, engine, framer, SamplingParams(temperature=1.0, seed=5), cfg, store=store)


def test_an_episode_draws_the_same_alone_or_in_a_batch_with_checkpoints(tmp_path):
    tok = agent_tokenizer()
    engine = LocalEngine(build_tiny_model(len(tok), seed=0), tok)
    framer = ChatFramer(tok)
    made = terminal_basics.generate(tmp_path / "tasks", 2, seed=0)
    first, second = (read_task(tmp_path / "tasks" / t.id) for t in made)
    pair = _run([(first, 0), (second, 0)], engine, framer, EpisodeStore(tmp_path / "a"))
    alone = _run([(second, 0)], engine, framer, EpisodeStore(tmp_path / "b"))
    assert alone[0].tokens == pair[1].tokens
    positional = _run([(second, 0)], engine, framer, None)   # no store: row 0's stream
    assert positional[0].tokens != pair[1].tokens
