"""A 32k-token prompt on the tiny model: chunked prefill inside the memory the planner predicts."""

import threading
import time

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.engine.paged.planner import plan_kv
from posttrain.models.tiny import build_tiny_model

PROMPT_LEN = 32768


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


class PeakRss:
    """Sample resident memory every 5 ms while a block runs."""

    def __enter__(self):
        self.peak, self.stop = rss_bytes(), False
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while not self.stop:
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


@pytest.mark.slow
def test_32k_prompt_chunked_prefill_stays_within_planned_memory(tokenizer):
    model = build_tiny_model(len(tokenizer), max_position_embeddings=PROMPT_LEN + 64)
    max_tokens, spec = 4, EngineConfig().spec_tokens
    plan = plan_kv(model.config.to_dict(), PROMPT_LEN + max_tokens + spec, batch=1)
    engine = LocalEngine(model, config=EngineConfig(num_blocks=plan["blocks"], max_num_batched_tokens=2048))
    kv_bytes = engine.kv.kv.numel() * 4
    assert kv_bytes == plan["total_bytes"] + plan["bytes_per_token"] * engine.config.block_size  # + null block
    prompt = torch.randint(20, len(tokenizer), (PROMPT_LEN,), generator=torch.Generator().manual_seed(0)).tolist()
    before = rss_bytes()
    with PeakRss() as rss:
        out = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=max_tokens))[0]
    assert len(out.token_ids) == max_tokens
    assert engine.stats.steps >= PROMPT_LEN // 2048  # the prompt went in chunks
    activations = 512 * 2**20  # score matrices are split to ~256 MB (attention.MAX_SCORE_ELEMS)
    assert rss.peak - before <= plan["total_bytes"] + activations
