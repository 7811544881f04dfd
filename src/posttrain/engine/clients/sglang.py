"""SGLangEngine: the engine interface over one SGLang server's native API. UNTESTED HERE: no
CPU build of SGLang installs on this machine (sglang 0.5.23 pins torch==2.14.1 from PyPI, a
CUDA build, plus flashinfer and CUDA kernels), so this client has never met a real server.

Generation: POST /generate with `input_ids` and `return_logprob`; the sampled ids and their
logprobs come back in meta_info.output_token_logprobs as (logprob, id, text) triples.
Weights: the same staged safetensors directory as vLLM, through /update_weights_from_disk,
between /pause_generation and /continue_generation (in-flight requests finish on the old
weights first, as SGLang's RL integration does), then /flush_cache. Across hosts:
/init_weights_update_group and /update_weights_from_distributed (NCCL broadcast from the
trainer: the broadcast itself is the caller's, see `announce_distributed_update`).
"""

from __future__ import annotations

import time
from pathlib import Path

from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.vllm import SEED_STRIDE, VLLMEngine
from posttrain.errors import EngineError
from posttrain.types import Completion


class SGLangEngine(VLLMEngine):
    def _first_model(self) -> str:
        info = self.http.call("GET", "/get_model_info")
        return str((info or {}).get("model_path", "default"))

    def _body(self, prompt: list[int], params: SamplingParams, row: int) -> dict:
        sp = {"temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k or -1,
              "max_new_tokens": params.max_tokens, "stop": list(params.stop) or None,
              "stop_token_ids": list(params.stop_token_ids), "ignore_eos": True}
        if params.seed is not None:
            sp["sampling_seed"] = (params.seed * SEED_STRIDE + row) % 2**31
        return {"input_ids": list(prompt), "sampling_params": sp, "return_logprob": True}

    def _one(self, prompt: list[int], params: SamplingParams, row: int, version: int) -> Completion:
        t0 = time.perf_counter()
        data = self.http.call("POST", "/generate", self._body(prompt, params, row))
        try:
            triples = data["meta_info"]["output_token_logprobs"]
            lps, ids = [float(t[0]) for t in triples], [int(t[1]) for t in triples]
            kind = (data["meta_info"].get("finish_reason") or {}).get("type")
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise EngineError(f"{self.base_url}/generate: no output_token_logprobs in the answer "
                              f"({type(e).__name__}: {e}); {str(data)[:200]}") from e
        reason = "stop" if kind == "stop" else "length"
        return Completion(ids, lps, reason, version, {"generate_s": time.perf_counter() - t0})

    def _checked(self, path: str, body: dict | None = None) -> dict:
        data = self.http.call("POST", path, body) or {}
        if isinstance(data, dict) and data.get("success") is False:
            raise EngineError(f"{self.base_url}{path}: {data.get('message', 'failed')}")
        return data

    def _load(self, directory: Path, version: int) -> None:
        self._checked("/pause_generation", {})
        try:
            self._checked("/update_weights_from_disk", {"model_path": str(directory),
                                                        "weight_version": str(version)})
            self._checked("/flush_cache")
        finally:
            self._checked("/continue_generation", {})

    def init_weights_group(self, master_address: str, master_port: int, rank_offset: int,
                           world_size: int, group_name: str = "posttrain", backend: str = "nccl") -> None:
        """Join the trainer's NCCL group (the trainer is rank 0)."""
        self._checked("/init_weights_update_group", {
            "master_address": master_address, "master_port": master_port, "rank_offset": rank_offset,
            "world_size": world_size, "group_name": group_name, "backend": backend})

    def announce_distributed_update(self, state_dict: dict, version: int, group_name: str = "posttrain") -> None:
        """Tell the server which tensors the trainer broadcasts. The call returns once the server
        has received them all: run it in a thread while the caller broadcasts each tensor from
        rank 0, in this order (torch.distributed.broadcast)."""
        names = list(state_dict)
        self._checked("/update_weights_from_distributed", {
            "names": names, "dtypes": [str(state_dict[n].dtype).removeprefix("torch.") for n in names],
            "shapes": [list(state_dict[n].shape) for n in names], "group_name": group_name,
            "weight_version": str(version)})

    def tokenize(self, text: str) -> list[int]:
        data = self.http.call("POST", "/tokenize", {"prompt": text, "add_special_tokens": False})
        return list(data["tokens"])
