"""The engine pieces the server needs: top alternatives of sampled tokens and prompt scoring."""

import pytest
import torch
from serve_helpers import chat_text

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine


@torch.inference_mode()
def _run(engine, prompt, params):
    with engine.lock:
        (seq,) = engine.add([prompt], params)
        while not seq.finished:
            engine.step()
    return seq


def _reference_logp(model, ids, temperature=1.0):
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0] / temperature, -1)


def test_top_logprobs_are_those_of_the_processed_distribution(agent_model, tok):
    prompt = tok.encode(chat_text("list files"), add_special_tokens=False)
    seq = _run(LocalEngine(agent_model, tok), prompt, SamplingParams(temperature=0.7, max_tokens=6, seed=3, top_logprobs=3))
    ref = _reference_logp(agent_model, seq.tokens, 0.7)
    assert len(seq.top_logprobs) == len(seq.output)
    for i, (tok_id, lp, tops) in enumerate(zip(seq.output, seq.logprobs, seq.top_logprobs)):
        row = ref[len(prompt) - 1 + i]
        want = dict(zip(*[t.tolist() for t in reversed(row.topk(3))]))
        assert tops.keys() == want.keys() and all(abs(tops[k] - want[k]) < 1e-4 for k in want)
        assert lp <= max(tops.values()) + 1e-6


def test_speculative_decoding_reports_the_same_alternatives(agent_model, tok):
    prompt = tok.encode(chat_text("list files") + "<bash>ls -la</bash><|end|>" + chat_text("list files"),
                        add_special_tokens=False)
    params = SamplingParams(temperature=0, max_tokens=8, top_logprobs=2, stop_token_ids=[tok.eos_token_id])
    plain = _run(LocalEngine(agent_model, tok), prompt, params)
    spec = _run(LocalEngine(agent_model, tok, config=EngineConfig(spec_method="ngram")), prompt, params)
    assert spec.output == plain.output and len(spec.top_logprobs) == len(plain.top_logprobs)
    for a, b in zip(spec.top_logprobs, plain.top_logprobs):
        assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-4 for k in a)


def test_score_matches_the_model_over_several_chunks(agent_model, tok):
    prompt = tok.encode(" ".join(f"echo step {i}: cat file_{i}.txt" for i in range(60)), add_special_tokens=False)
    assert len(prompt) > 300  # more than one lm_head chunk
    lps, tops = LocalEngine(agent_model, tok).score(prompt, top_k=2)
    ref = _reference_logp(agent_model, prompt)
    want = ref[:-1].gather(-1, torch.tensor(prompt[1:]).unsqueeze(-1)).squeeze(-1)
    assert lps[0] is None and tops[0] is None and len(lps) == len(prompt)
    assert max(abs(a - b) for a, b in zip(lps[1:], want.tolist())) < 1e-4
    best = ref[:-1].max(-1).values.tolist()
    assert all(abs(max(t.values()) - b) < 1e-4 and len(t) == 2 for t, b in zip(tops[1:], best))


def test_score_refuses_what_generate_refuses(agent_model, tok):
    with pytest.raises(ValueError, match="empty"):
        LocalEngine(agent_model, tok).score([])
