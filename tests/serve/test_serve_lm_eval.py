"""lm-eval's `local-completions` model against `posttrain serve` (a subprocess on loopback):
a generation task and a loglikelihood task (`echo` with prompt logprobs), both custom tasks
whose data ships beside this file (lm_eval_tasks/), run offline.
"""

import os
import subprocess
import sys
import time

import httpx
import pytest
import torch

from serve_helpers import free_port, need

TASKS = os.path.join(os.path.dirname(__file__), "lm_eval_tasks")


@pytest.fixture
def cli_server(model_dir):
    port = free_port()
    cmd = [sys.executable, "-m", "posttrain", "serve", "--model", str(model_dir), "--port", str(port), "--threads", "1",
           "--dtype", "float32"]  # the reference loglikelihoods below are fp32 (auto is bf16 on AMX CPUs)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.time() < deadline, "posttrain serve did not come up"
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


@pytest.fixture
def lm_eval(tmp_path, monkeypatch):
    """lm_eval imported offline: datasets and the hub read these at import time."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    monkeypatch.chdir(TASKS)  # the task YAMLs name their data files relative to here
    return need("lm_eval")


def _reference_loglikelihood(model, tok, context: str, continuation: str) -> float:
    ids = tok.encode(context + continuation, add_special_tokens=False)
    n_ctx = len(tok.encode(context, add_special_tokens=False))
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1], -1)
    return float(sum(logp[i - 1, ids[i]] for i in range(n_ctx, len(ids))))


@pytest.mark.slow  # a `posttrain serve` subprocess and lm-eval's imports: ~45 s on a busy 2-core box
def test_lm_eval_generation_and_loglikelihood_tasks(lm_eval, cli_server, model_dir, agent_model, tok):
    from lm_eval.tasks import TaskManager

    args = {"base_url": f"{cli_server}/v1/completions", "model": "tiny-agent", "tokenizer": str(model_dir),
            "tokenizer_backend": "huggingface", "max_retries": 1, "max_length": 512}
    out = lm_eval.simple_evaluate(model="local-completions", model_args=args,
                                  tasks=["posttrain_actions_gen", "posttrain_actions_choice"],
                                  task_manager=TaskManager(include_path=TASKS), log_samples=True)
    assert out["results"]["posttrain_actions_gen"]["exact_match,none"] == 1.0
    assert out["results"]["posttrain_actions_choice"]["acc,none"] == 1.0
    for sample in out["samples"]["posttrain_actions_gen"]:
        assert sample["filtered_resps"][0] == sample["target"]
    for sample in out["samples"]["posttrain_actions_choice"]:
        doc = sample["doc"]
        for choice, resp in zip(doc["choices"], sample["resps"]):
            loglik, is_greedy = resp[0]
            assert loglik == pytest.approx(_reference_loglikelihood(agent_model, tok, doc["prompt"], choice), abs=1e-3)
            assert is_greedy == (choice == doc["choices"][doc["gold"]])
