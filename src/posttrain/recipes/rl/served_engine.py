"""The rollout engine of `posttrain rl` when `engines.kind = "vllm"`: start one vLLM server per
replica (or attach to `engines.urls`), refuse a server whose tokenizer differs from the
trainer's, push the trainer's weights as version 0, and gate the start on logprob agreement.

    [engines]
    kind = "vllm"            # python = ".venv-vllm/bin/python" (scripts/vllm_env.sh)
    replicas = 1             # or urls = ["http://127.0.0.1:8000"] to attach
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

from posttrain.engine.clients.vllm import VLLMEngine
from posttrain.engine.fleet.config import EnginesConfig
from posttrain.engine.fleet.replicas import ReplicaSet
from posttrain.engine.fleet.routing import AffinityRouter
from posttrain.engine.fleet.servers import EngineServer, ServerSpec, worker_pythonpath
from posttrain.errors import PosttrainError
from posttrain.models.tiny import save_policy
from posttrain.rollout.conformance import PROBE_TEXTS, GatedEngine

TOKENIZER_PROBES = PROBE_TEXTS + ["<|user|>héllo wörld<|end|>", "  spaces\tand\nnewlines  "]


def check_tokenizer(engine: VLLMEngine, tokenizer) -> None:
    """Token ids cross the wire as ids: the server must split text exactly as the trainer."""
    for text in TOKENIZER_PROBES:
        theirs, ours = engine.tokenize(text), tokenizer.encode(text, add_special_tokens=False)
        if theirs != ours:
            raise PosttrainError(
                f"the engine at {engine.base_url} tokenizes differently from the trainer, so token "
                f"ids would not match: {text!r} is {theirs[:12]} there and {ours[:12]} here")


def server_specs(ec: EnginesConfig, model_dir: Path, run_dir: Path) -> list[ServerSpec]:
    return [ServerSpec(python=ec.python, model_dir=str(model_dir), dtype=ec.compute_dtype.name,
                       log_path=run_dir / "engines" / f"replica-{i}.log", max_model_len=ec.max_model_len,
                       cores=ec.cores[i] if ec.cores else None, kv_cache_gib=ec.kv_cache_gib,
                       extra_args=list(ec.extra_args), enforce_eager=ec.enforce_eager)
            for i in range(ec.replicas)]


def _start_servers(ec: EnginesConfig, model, tok, run_dir: Path, stack) -> list[EngineServer]:
    if not Path(ec.python).exists():
        raise PosttrainError(f"engines.python {ec.python} does not exist; build it with scripts/vllm_env.sh")
    model_dir = save_policy(model, tok, run_dir / "engines" / "policy")
    pythonpath = worker_pythonpath(run_dir)
    servers = [EngineServer(spec, pythonpath) for spec in server_specs(ec, model_dir, run_dir)]
    for s in servers:
        stack.callback(s.stop)
        s.launch()
    for s in servers:
        s.wait_ready(ec.startup_timeout_s)
    (run_dir / "engines" / "servers.json").write_text(json.dumps(
        [{"url": s.url, "watchdog_pid": s.proc.pid, "log": str(s.spec.log_path)} for s in servers]))
    return servers


def _replica_set(ec: EnginesConfig, urls: list[str], servers: list[EngineServer], log: Path) -> ReplicaSet:
    def revive(i: int) -> None:
        """Restart the server in the background (stop first: a server that failed an update may
        still run, with mixed weights); it rejoins at an update once it answers."""
        s = servers[i]
        threading.Thread(target=lambda: (s.stop(), s.launch()), daemon=True, name=f"revive-{i}").start()

    def ready(i: int) -> bool:
        return servers[i].running() and VLLMEngine.is_up(servers[i].url)

    def reconnect(i: int) -> VLLMEngine:
        return VLLMEngine(urls[i], max_concurrent=ec.max_concurrent)

    replicas = [VLLMEngine(u, max_concurrent=ec.max_concurrent) for u in urls]
    hooks = dict(revive=revive, ready=ready, reconnect=reconnect) if servers else {}
    return ReplicaSet(replicas, AffinityRouter(ec.affinity_slack_tokens), log_path=log, **hooks)


@contextlib.contextmanager
def served_rollout_engine(cfg, model, tok):
    """A GatedEngine over the vLLM replicas, holding the trainer's weights as version 0."""
    ec: EnginesConfig = cfg.engines
    run_dir = Path(cfg.run_dir)
    with contextlib.ExitStack() as stack:
        servers = [] if ec.urls else _start_servers(ec, model, tok, run_dir, stack)
        urls = list(ec.urls) or [s.url for s in servers]
        replicas = _replica_set(ec, urls, servers, run_dir / "engines" / "replicas.jsonl")
        stack.callback(replicas.close)
        for r in replicas.replicas:
            check_tokenizer(r, tok)
        engine = GatedEngine(replicas, tok, run_dir, ec, cfg.rollout.temperature)
        engine.start(model)  # attached servers may hold any weights: push ours as version 0
        yield engine
