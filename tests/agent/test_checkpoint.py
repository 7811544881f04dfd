"""Episode checkpoints: a process running an episode is SIGKILLed mid-episode; run again, the
episode resumes at its last completed turn in a fresh sandbox with the files restored, and ends
exactly as an uninterrupted run does."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from engine_server import ScriptedEngineServer, agent_tokenizer

from posttrain.agent.chat import ChatFramer
from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.openai import RemoteEngine
from posttrain.sandbox.reaper import reap
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics

REPLIES = ["<bash>echo hi > /app/note</bash>", "<bash>cat /app/note</bash>",
           "<bash>cat /app/note; echo again</bash>", "<submit/>"]
CHILD = """
import sys
sys.path.insert(0, {here!r})
from test_checkpoint import episode
episode({url!r}, {task!r}, {store!r})
"""


def episode(url: str, task_dir: str, store: str):
    engine = RemoteEngine(url, "scripted", timeout=30)
    try:
        ep, = run_episodes([(read_task(Path(task_dir)), 0)], engine, ChatFramer(agent_tokenizer()),
                           SamplingParams(seed=0), AgentConfig(max_turns=5, sandbox_backend="bwrap"),
                           store=EpisodeStore(Path(store)))
    finally:
        engine.close()
    return ep


def test_sigkill_mid_episode_then_resume_equals_an_uninterrupted_run(tmp_path):
    generated, = terminal_basics.generate(tmp_path / "tasks", 1, seed=0, families=["create-file"])
    task_dir = str(tmp_path / "tasks" / generated.id)
    child = {}
    kill_at_turn = lambda turn: os.kill(child["pid"], signal.SIGKILL) if turn == 2 and child else None  # noqa: E731
    server = ScriptedEngineServer(agent_tokenizer(), REPLIES, on_request=kill_at_turn)
    try:
        whole = episode(server.url, task_dir, str(tmp_path / "a"))
        assert not any((tmp_path / "a").iterdir())            # dropped once the episode ended

        code = CHILD.format(here=str(Path(__file__).parent), url=server.url, task=task_dir,
                            store=str(tmp_path / "b"))
        proc = subprocess.Popen([sys.executable, "-c", code], env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})
        child["pid"] = proc.pid
        assert proc.wait(timeout=120) == -signal.SIGKILL
        child.clear()
        reap()                                                  # the killed child's sandbox
        store = EpisodeStore(tmp_path / "b")
        state, snapshot = store.load((generated.id, 0, 0))
        assert state["turn"] == 2 and (snapshot / "app" / "note").read_text() == "hi\n"

        resumed = episode(server.url, task_dir, str(tmp_path / "b"))
    finally:
        server.stop()
    assert resumed.tokens == whole.tokens and resumed.logprobs == whole.logprobs
    assert [t.observation for t in resumed.turns] == [t.observation for t in whole.turns]
    assert resumed.turns[2].observation == "hi\nagain"        # the file came back with the snapshot
    assert (resumed.status, resumed.reward) == (whole.status, whole.reward)
    assert json.dumps(resumed.to_dict()["reward_details"]) == json.dumps(whole.to_dict()["reward_details"])
    assert not any((tmp_path / "b").iterdir())


def test_a_save_after_a_kill_mid_swap_keeps_one_whole_checkpoint(tmp_path):
    from posttrain.agent.trial import open_task_sandbox

    generated, = terminal_basics.generate(tmp_path / "tasks", 1, seed=0, families=["create-file"])
    sandbox = open_task_sandbox(read_task(tmp_path / "tasks" / generated.id), "bwrap")
    try:
        store, key = EpisodeStore(tmp_path / "store"), (generated.id, 0, 0)
        assert store.save(key, {"turn": 1}, sandbox)
        final = store.path(*key)
        old = final.with_name(final.name + ".old")
        old.mkdir()                                   # a kill between the swap's two renames
        (old / "state.json").write_text('{"turn": 0}')
        assert store.save(key, {"turn": 2}, sandbox)
        assert store.load(key)[0] == {"turn": 2} and not old.exists()
    finally:
        sandbox.close()
