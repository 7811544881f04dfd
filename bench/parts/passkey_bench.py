"""The passkey section of bench/train.py (issue 32): train at 512, read at 2,048 with no rope
scaling, PI and YaRN (each tuned first), report exact-match retrieval by depth. The task and the
training loop: parts/passkey.py."""

from __future__ import annotations

import time

from parts import passkey as pk

TRAIN_LEN, EVAL_LEN, FACTOR, SEED = 512, 2048, 4, 0
TRAIN_DEPTHS = [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
# key block in the first 72% of the filler: more than 560 tokens before the query at 2,048
FAR_DEPTHS = [(0.0, 0.18), (0.18, 0.36), (0.36, 0.54), (0.54, 0.72)]
NEAR_DEPTHS = [(0.9, 1.0)]  # under 210 tokens before the query: relative distances seen in training
MIXED = (96, 128, 192, 256, 384, 512)
# Training phases, each its own warm-up and cosine: (steps, lengths drawn from, tokens per step,
# lr). Induction forms fastest on many short samples (48 tokens); the second phase reaches 512.
FULL = dict(phases=[(300, (48,), 4608, 1e-3), (600, MIXED, 3072, 5e-4)],
            tune_steps=200, tune_batch=4, tune_lr=1e-4, per_bucket=32, engine_n=16)
QUICK = dict(phases=[(300, (48,), 4608, 1e-3), (60, MIXED, 3072, 5e-4)],
             tune_steps=15, tune_batch=1, tune_lr=1e-4, per_bucket=6, engine_n=4)


def _tuned(base, kind: str, p: dict, seed: int) -> tuple[dict, object]:
    """Scale a copy of base by `kind` ("none": the plain rope), read it untuned, tune it at
    EVAL_LEN for p["tune_steps"], read it again (far and near keys)."""
    model = pk.scaled_copy(base, kind, FACTOR, TRAIN_LEN if kind != "none" else EVAL_LEN)
    out = {"untuned": pk.accuracy_by_depth(model, EVAL_LEN, p["per_bucket"], FAR_DEPTHS, seed + 30)}
    t = time.perf_counter()
    out["tune_log"] = pk.train(model, p["tune_steps"], (EVAL_LEN,), p["tune_batch"] * EVAL_LEN, p["tune_lr"],
                               seed + 20, log_every=25)
    out["tune_s"] = round(time.perf_counter() - t, 1)
    out["far"] = pk.accuracy_by_depth(model, EVAL_LEN, p["per_bucket"], FAR_DEPTHS, seed + 30)
    out["near"] = pk.accuracy_by_depth(model, EVAL_LEN, p["per_bucket"], NEAR_DEPTHS, seed + 40)
    print(f"  {kind}: untuned {out['untuned']['all']:.3f}, tuned {out['far']['all']:.3f} "
          f"({p['tune_steps']} steps, {out['tune_s']} s)", flush=True)
    return out, model


def measure(quick: bool) -> dict:
    p = QUICK if quick else FULL
    start = time.perf_counter()
    base = pk.build(TRAIN_LEN, SEED)
    t = time.perf_counter()
    train_log = [pk.train(base, *phase, seed=SEED + i, log_every=100) for i, phase in enumerate(p["phases"])]
    train_s = round(time.perf_counter() - t, 1)
    at_train = pk.accuracy_by_depth(base, TRAIN_LEN, p["per_bucket"], TRAIN_DEPTHS, SEED + 1)
    print(f"  at {TRAIN_LEN}: {at_train['all']:.3f} after {train_s} s", flush=True)
    arms, models = {}, {}
    for kind in ("none", "linear", "yarn"):  # "none": no scaling, read as trained, then tuned alike
        arms[kind], models[kind] = _tuned(base, kind, p, SEED)
    engine = pk.engine_accuracy(models["yarn"], EVAL_LEN, p["engine_n"], (0.0, 0.72), SEED + 50)
    print(f"  engine, YaRN tuned: {engine}", flush=True)
    return _result(p, train_s, train_log, at_train, arms, engine, round(time.perf_counter() - start, 1))


def _result(p, train_s, train_log, at_train, arms, engine, total_s) -> dict:
    none, pi, yarn = arms["none"], arms["linear"], arms["yarn"]
    return {
        "passkey_model": (f"Llama, hidden {pk.MODEL['hidden_size']}, {pk.MODEL['num_hidden_layers']} layers, "
                          f"{pk.MODEL['num_attention_heads']} heads, vocab {pk.VOCAB}, fp32, seed {SEED}"),
        "passkey_task": (f"<bos> random filler ({len(pk.FILLER)} tokens) <key> {pk.N_DIGITS} distinct digits at a "
                         "random depth, filler, <query> <key> -> the digits; exact match of all digits, greedy"),
        "passkey_train_len": TRAIN_LEN, "passkey_eval_len": EVAL_LEN, "passkey_factor": FACTOR,
        "passkey_train_phases": [{"steps": n, "lengths": list(lengths), "tokens_per_step": tokens, "lr": lr}
                                 for n, lengths, tokens, lr in p["phases"]],
        "passkey_train_s": train_s, "passkey_train_log": train_log,
        "passkey_acc_train_len": at_train["all"], "passkey_acc_train_len_by_depth": at_train,
        "passkey_far_depths": "key block in the first 72% of the filler: over 560 tokens before the query",
        "passkey_acc_no_scaling": none["untuned"]["all"], "passkey_acc_no_scaling_by_depth": none["untuned"],
        "passkey_acc_no_scaling_tuned": none["far"]["all"], "passkey_acc_no_scaling_tuned_by_depth": none["far"],
        "passkey_acc_pi": pi["far"]["all"], "passkey_acc_pi_by_depth": pi["far"],
        "passkey_acc_yarn": yarn["far"]["all"], "passkey_acc_yarn_by_depth": yarn["far"],
        "passkey_acc_pi_untuned": pi["untuned"]["all"], "passkey_acc_pi_untuned_by_depth": pi["untuned"],
        "passkey_acc_yarn_untuned": yarn["untuned"]["all"], "passkey_acc_yarn_untuned_by_depth": yarn["untuned"],
        "passkey_acc_near": {k: a["near"]["all"] for k, a in arms.items()},
        "passkey_tune_steps": p["tune_steps"], "passkey_tune_batch": p["tune_batch"], "passkey_tune_lr": p["tune_lr"],
        "passkey_tune_len": EVAL_LEN,
        "passkey_tune_s": {k: a["tune_s"] for k, a in arms.items()},
        "passkey_tune_logs": {k: a["tune_log"] for k, a in arms.items()},
        "passkey_eval_per_bucket": p["per_bucket"],
        "passkey_engine_yarn": engine,
        "passkey_total_s": total_s,
        "passkey_headline_met": pi["far"]["all"] >= 0.9 and yarn["far"]["all"] >= 0.9,
    }


def table(r: dict) -> str:
    buckets = [k for k in r["passkey_acc_pi_by_depth"] if k != "all"]
    rows = [("no scaling", r["passkey_acc_no_scaling_by_depth"]),
            ("no scaling, tuned", r["passkey_acc_no_scaling_tuned_by_depth"]),
            ("PI (linear x4)", r["passkey_acc_pi_untuned_by_depth"]),
            ("PI (linear x4), tuned", r["passkey_acc_pi_by_depth"]),
            ("YaRN (x4)", r["passkey_acc_yarn_untuned_by_depth"]),
            ("YaRN (x4), tuned", r["passkey_acc_yarn_by_depth"])]
    lines = [f"passkey at {r['passkey_eval_len']} (trained at {r['passkey_train_len']}: "
             f"{r['passkey_acc_train_len']:.3f}); tuning {r['passkey_tune_steps']} steps; depth of the key:",
             f"{'arm':<24}" + "".join(f"{b:>11}" for b in buckets) + f"{'all':>8}"]
    lines += [f"{name:<24}" + "".join(f"{acc[b]:>11.3f}" for b in buckets) + f"{acc['all']:>8.3f}"
              for name, acc in rows]
    lines.append(f"near keys (last 10%), tuned: {r['passkey_acc_near']}; "
                 f"engine (YaRN, tuned): {r['passkey_engine_yarn']}; {r['passkey_total_s']} s in all")
    return "\n".join(lines)
