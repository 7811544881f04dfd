"""RemoteEngine: the `generate` interface over any OpenAI-compatible /v1/completions server.

Token ids go in as the prompt and come back through the `return_token_ids` extension (our
server and vLLM); logprobs are the server's per-token logprobs. Note that vLLM reports raw
(pre-temperature) logprobs unless started with `--logprobs-mode processed_logprobs`.
"""

from __future__ import annotations

import time

import httpx

from posttrain.engine.base import Engine, SamplingParams
from posttrain.errors import PosttrainError
from posttrain.types import Completion


class RemoteEngine(Engine):
    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, timeout: float = 600.0):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.model = model or self._first_model()
        self.policy_version = 0

    def _first_model(self) -> str:
        data = self._call("GET", "/v1/models")["data"]
        if not data:
            raise PosttrainError(f"{self.client.base_url} serves no models")
        return data[0]["id"]

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        try:
            r = self.client.request(method, path, json=body)
        except httpx.HTTPError as e:
            raise PosttrainError(f"cannot reach {self.client.base_url}{path}: {e}") from e
        if r.status_code >= 400:
            try:
                message = r.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = r.text[:200]
            raise PosttrainError(f"{path} answered {r.status_code}: {message}")
        return r.json()

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """One request carrying every prompt; identical prompts share a prefill server-side."""
        t0 = time.perf_counter()
        body = {
            "model": self.model,
            "prompt": [list(p) for p in prompts],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
            "stop_token_ids": list(params.stop_token_ids),
            "stop": list(params.stop) or None,
            "seed": params.seed,
            "logprobs": 0,
            "return_token_ids": True,
            "ignore_eos": True,  # stop exactly where params say, as the local engine does
        }
        data = self._call("POST", "/v1/completions", body)
        self.policy_version = data.get("policy_version", self.policy_version)
        wall = time.perf_counter() - t0
        out: list[Completion | None] = [None] * len(prompts)
        for choice in data["choices"]:
            ids = choice.get("token_ids")
            if ids is None:
                raise PosttrainError("the server did not return token ids (needs return_token_ids support)")
            lps = (choice.get("logprobs") or {}).get("token_logprobs") or [0.0] * len(ids)
            reason = "stop" if choice.get("finish_reason") == "stop" else "length"
            out[choice["index"]] = Completion(list(ids), [float(x) for x in lps], reason, self.policy_version, {"generate_s": wall})
        if any(c is None for c in out):
            raise PosttrainError("the server returned fewer choices than prompts")
        return out

    def close(self) -> None:
        self.client.close()
