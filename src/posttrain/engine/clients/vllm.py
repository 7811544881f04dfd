"""VLLMEngine: the engine interface over one vLLM server, token-in/token-out, with versioned
weight updates through our worker extension (engine/fleet/vllm_worker.py) over /collective_rpc.

Each prompt is its own /v1/completions request (sent concurrently; vLLM batches them), so
each row gets its own seed, seed + row: one seed for a multi-prompt request would give every
row of a GRPO group the same sample. Logprobs are those vLLM sampled from when the server
runs with `--logprobs-mode processed_logprobs` (the launcher sets it).

Weight updates and generation exclude each other here, on the client: an update waits for
the calls in flight, which finish on the old weights and carry the old version, then blocks
new calls until the new weights are loaded and the prefix cache is reset.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from posttrain.engine.base import Engine, SamplingParams
from posttrain.engine.clients.http_json import JSONClient
from posttrain.engine.clients.openai import completions_body, first_model
from posttrain.engine.clients.weight_files import staged_weights
from posttrain.errors import EngineError
from posttrain.types import Completion

SEED_STRIDE = 1_000_003  # row r of a call seeded s samples with seed s * stride + r


class VLLMEngine(Engine):
    concurrent = True  # LockedEngine lets calls through side by side; this class orders updates

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None,
                 timeout: float = 600.0, max_concurrent: int = 32):
        self.http = JSONClient(base_url, api_key, timeout)
        self.base_url = self.http.base_url
        self.model = model or first_model(self.http)
        self.policy_version = 0
        self.healthy = True  # False after a failed update: the weights may be mixed
        self.outstanding_tokens = 0  # prompt + max_tokens of the calls in flight (replica load)
        self._pool = ThreadPoolExecutor(max_concurrent, thread_name_prefix="vllm-request")
        self._cv = threading.Condition()
        self._active = 0
        self._updating = False

    # ---- generation --------------------------------------------------------------------

    def _one(self, prompt: list[int], params: SamplingParams, row: int, version: int) -> Completion:
        t0 = time.perf_counter()
        seed = None if params.seed is None else (params.seed * SEED_STRIDE + params.stream(row)) % 2**31
        body = completions_body(self.model, list(prompt), params, seed, top_k_off=-1)
        data = self.http.call("POST", "/v1/completions", body)
        try:
            choice = data["choices"][0]
            ids = [int(x) for x in choice["token_ids"]]
            lps = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise EngineError(f"{self.base_url}/v1/completions: no token ids and logprobs in "
                              f"the answer ({type(e).__name__}: {e}); {str(data)[:200]}") from e
        if len(ids) != len(lps):
            raise EngineError(f"{self.base_url}: {len(ids)} token ids but {len(lps)} logprobs")
        reason = "stop" if choice.get("finish_reason") == "stop" else "length"
        return Completion(ids, lps, reason, version, {"generate_s": time.perf_counter() - t0})

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        load = sum(len(p) + params.max_tokens for p in prompts)
        with self._cv:
            while self._updating:
                self._cv.wait()
            self._active += 1
            self.outstanding_tokens += load
            version = self.policy_version
        try:
            futures = [self._pool.submit(self._one, p, params, i, version) for i, p in enumerate(prompts)]
            return [f.result() for f in futures]
        finally:
            with self._cv:
                self._active -= 1
                self.outstanding_tokens -= load
                self._cv.notify_all()

    # ---- weights -----------------------------------------------------------------------

    def rpc(self, method: str, *args: str, timeout: float | None = None) -> list:
        data = self.http.call("POST", "/collective_rpc", {"method": method, "args": list(args)}, timeout)
        if not isinstance(data, dict) or "results" not in data:
            raise EngineError(f"{self.base_url}/collective_rpc {method}: unexpected answer {str(data)[:200]}")
        return data["results"]

    def load_weights_from(self, directory: Path, version: int) -> float:
        """Load a staged safetensors directory as `version`; seconds taken. Calls in flight
        finish first, on the old weights. On failure the replica is marked unhealthy."""
        with self._cv:
            self._updating = True
            while self._active:
                self._cv.wait()
        t0 = time.perf_counter()
        try:
            self._load(directory, version)
            self.policy_version = version
            return time.perf_counter() - t0
        except EngineError as e:
            self.healthy = False
            raise EngineError(f"weight update to version {version} failed on {self.base_url}; "
                              f"its weights may be mixed, so it must not serve: {e}") from e
        finally:
            with self._cv:
                self._updating = False
                self._cv.notify_all()

    def _load(self, directory: Path, version: int) -> None:
        """The server-specific part of an update: reload, then drop the prefix cache."""
        results = self.rpc("posttrain_load_weights", str(directory), str(version))
        self.http.call("POST", "/reset_prefix_cache")
        got = {int(r["version"]) if isinstance(r, dict) else r for r in results}
        if got != {version}:
            raise EngineError(f"workers report versions {sorted(got)} after loading {version}")

    def update_weights(self, state_dict: dict, version: int) -> None:
        with staged_weights(state_dict) as (directory, _):
            self.load_weights_from(directory, version)

    def served_version(self) -> int:
        """What the workers say they hold (-1: a load failed halfway)."""
        return min(int(v) for v in self.rpc("posttrain_weights_version"))

    def tokenize(self, text: str) -> list[int]:
        data = self.http.call("POST", "/tokenize", {"model": self.model, "prompt": text,
                                                    "add_special_tokens": False})
        return list(data["tokens"])

    def alive(self) -> bool:
        return self.is_up(self.base_url)

    @staticmethod
    def is_up(base_url: str) -> bool:
        """Whether the server answers /health now (no retry)."""
        try:
            return httpx.get(base_url.rstrip("/") + "/health", timeout=5.0).status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()
