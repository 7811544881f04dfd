"""The OpenAI /v1/completions API as the HTTP engines speak it: the one request body and the
served model (`completions_body`, `first_model`, which clients/vllm.py uses too), and
RemoteEngine, the `generate` interface over any OpenAI-compatible server.

Token ids go in as the prompt and come back through the `return_token_ids` extension (our
server and vLLM); logprobs are the server's per-token logprobs. vLLM reports raw
(pre-temperature) logprobs unless started with `--logprobs-mode processed_logprobs`.
"""

from __future__ import annotations

import time

from posttrain.engine.base import Engine, SamplingParams
from posttrain.engine.clients.http_json import JSONClient
from posttrain.errors import EngineError
from posttrain.types import Completion


def first_model(http: JSONClient) -> str:
    """The first model the server lists at /v1/models."""
    data = http.call("GET", "/v1/models")
    if not isinstance(data, dict) or not data.get("data"):
        raise EngineError(f"{http.base_url}/v1/models lists no model: {str(data)[:200]}")
    return data["data"][0]["id"]


def completions_body(model: str, prompt: list, params: SamplingParams, seed: int | None,
                     top_k_off: int = 0) -> dict:
    """A /v1/completions request for token ids (one prompt, or a list of them). It asks for
    the sampled ids and their logprobs back. It stops exactly where `params` say, as the
    embedded engine does (`ignore_eos`). top_k_off: the server's "no top-k" (vLLM's is -1)."""
    return {"model": model, "prompt": prompt, "max_tokens": params.max_tokens,
            "temperature": params.temperature, "top_p": params.top_p,
            "top_k": params.top_k or top_k_off, "stop_token_ids": list(params.stop_token_ids),
            "stop": list(params.stop) or None, "seed": seed, "logprobs": 0,
            "return_token_ids": True, "ignore_eos": True}


class RemoteEngine(Engine):
    """`RemoteEngine(base_url)`: one /v1/completions request per `generate` call."""

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, timeout: float = 600.0):
        self.http = JSONClient(base_url, api_key, timeout)
        self.model = model or first_model(self.http)
        self.policy_version = 0

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """One request carrying every prompt; identical prompts share a prefill server-side."""
        t0 = time.perf_counter()
        body = completions_body(self.model, [list(p) for p in prompts], params, params.seed)
        if params.seed_rows is not None:   # our server's extension (vLLM's client seeds per row)
            body["seed_rows"] = list(params.seed_rows)
        data = self.http.call("POST", "/v1/completions", body)
        self.policy_version = data.get("policy_version", self.policy_version)
        wall = time.perf_counter() - t0
        out: list[Completion | None] = [None] * len(prompts)
        for choice in data["choices"]:
            ids = choice.get("token_ids")
            if ids is None:
                raise EngineError("the server did not return token ids (needs return_token_ids support)")
            lps = (choice.get("logprobs") or {}).get("token_logprobs") or [0.0] * len(ids)
            reason = "stop" if choice.get("finish_reason") == "stop" else "length"
            out[choice["index"]] = Completion(list(ids), [float(x) for x in lps], reason, self.policy_version, {"generate_s": wall})
        if any(c is None for c in out):
            raise EngineError("the server returned fewer choices than prompts")
        return out

    def close(self) -> None:
        self.http.close()
