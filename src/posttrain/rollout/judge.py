"""A judge model as a reward: another model, behind an engine, scores each reply.

`tasks.reward = "judge"` with a `[judge]` table: the replies of a wave go to the judge in one
batched generate call (greedy), each framed by the judge's own chat template from `template`
({prompt}, {reply}, {target}); the first number of the judge's answer, divided by `scale`, is
the reward. Answers are cached by (prompt, reply), so a repeated reply is not judged twice.
A judge that fails (its engine raised, no number, a number outside [0, scale]) makes that
episode a verifier_error: never a reward, never trained. The judge runs on the embedded engine
over `model` (an HF directory), or on a server (`base_url`: posttrain serve or vLLM) with
`model` giving its tokenizer.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from pydantic import Field

from posttrain.config_base import StrictModel
from posttrain.engine.base import Engine, SamplingParams
from posttrain.errors import EngineError
from posttrain.types import Reward

DEFAULT_TEMPLATE = ("Rate the reply to the task from 0 to 10.\nTask: {prompt}\nReference: {target}\n"
                    "Reply: {reply}\nAnswer with the number only.")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class JudgeConfig(StrictModel):
    model: str                                  # HF directory: the judge's weights and tokenizer
    base_url: str | None = None                 # a server to ask instead of the embedded engine
    api_key_env: str | None = None              # the environment variable holding its key
    template: str = DEFAULT_TEMPLATE
    scale: float = Field(10.0, gt=0)            # the judge's top score; reward = score / scale
    max_tokens: int = Field(8, ge=1)
    cache_size: int = Field(100_000, ge=0)


class JudgeError(Exception):
    """The judge gave no usable score for a reply."""


def parse_score(answer: str, scale: float) -> float:
    """The reward in [0, 1] from the judge's answer; JudgeError if it holds no score in range."""
    found = NUMBER.search(answer)
    if found is None:
        raise JudgeError(f"no score in the judge's answer {answer[:80]!r}")
    score = float(found.group())
    if not math.isfinite(score) or not 0 <= score <= scale:
        raise JudgeError(f"the judge's score {score} is outside [0, {scale}]")
    return score / scale


@dataclass
class JudgeReward:
    """`score_batch([(reply, prompt), ...])`: per item its Reward or the JudgeError."""

    engine: Engine
    tokenizer: object
    frame: object                   # the judge's chat framing of one user turn (agent.framing)
    stop_id: int
    config: JudgeConfig
    _cache: OrderedDict = field(default_factory=OrderedDict, init=False)
    requests: int = field(default=0, init=False)     # items asked of the judge (cache misses)
    hits: int = field(default=0, init=False)
    judge_s: float = field(default=0.0, init=False)  # wall time inside the judge's calls

    def score_batch(self, items: list) -> list:
        keys = [(prompt.text, reply) for reply, prompt in items]
        targets = {k: prompt.target for k, (_, prompt) in zip(keys, items)}
        todo = list(dict.fromkeys(k for k in keys if k not in self._cache))
        self.hits += len(keys) - len(todo)
        answers = self._ask(todo, targets) if todo else {}
        out = []
        for key in keys:
            answer = self._cache[key] if key in self._cache else answers[key]
            out.append(answer if isinstance(answer, Exception) else self._scored(answer))
        return out

    def _scored(self, answer: str) -> Reward | JudgeError:
        try:
            return Reward(parse_score(answer, self.config.scale))
        except JudgeError as e:
            return e

    def _ask(self, todo: list, targets: dict) -> dict:
        """One greedy call for every uncached (prompt, reply); an engine error fails them all."""
        ids = [self.tokenizer.encode(self.frame(self.config.template.format(
            prompt=k[0], reply=k[1], target=targets[k])), add_special_tokens=False) for k in todo]
        params = SamplingParams(temperature=0.0, max_tokens=self.config.max_tokens, stop_token_ids=[self.stop_id])
        t0 = time.perf_counter()
        try:
            comps = self.engine.generate(ids, params)
        except (EngineError, ValueError) as e:
            return {k: JudgeError(f"the judge failed: {type(e).__name__}: {e}") for k in todo}
        finally:
            self.judge_s += time.perf_counter() - t0
            self.requests += len(todo)
        answers = {k: self.tokenizer.decode([t for t in c.token_ids if t != self.stop_id], skip_special_tokens=True)
                   for k, c in zip(todo, comps)}
        for k, a in answers.items():
            self._remember(k, a)
        return answers

    def _remember(self, key, answer: str) -> None:
        self._cache[key] = answer
        while len(self._cache) > self.config.cache_size:
            self._cache.popitem(last=False)

    def metrics(self) -> dict[str, float]:
        asked = self.requests + self.hits
        return {"judge_requests": float(self.requests),
                "judge_calls_per_s": self.requests / self.judge_s if self.judge_s else 0.0,
                "judge_cache_hit_rate": self.hits / asked if asked else 0.0}


def open_judge(config: JudgeConfig, device=None) -> JudgeReward:
    """The judge of `config`: its tokenizer and chat framing from `model`, its engine embedded
    (over `model`'s weights, on `device`: the run's, devices.py; None: the CPU) or the server
    at `base_url`."""
    from posttrain.agent.framing import single_turn
    from posttrain.models.tiny import load_policy

    if config.base_url is None:
        from posttrain.engine.paged.local import LocalEngine

        model, tokenizer = load_policy(config.model)
        engine = LocalEngine(model, tokenizer, device=device)
    else:
        from transformers import AutoTokenizer

        from posttrain.engine.clients.openai import RemoteEngine

        tokenizer = AutoTokenizer.from_pretrained(config.model)
        key = os.environ.get(config.api_key_env) if config.api_key_env else None
        engine = RemoteEngine(config.base_url, api_key=key)
    frame, end_id = single_turn(tokenizer)
    return JudgeReward(engine, tokenizer, frame, end_id, config)
