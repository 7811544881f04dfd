"""TRL's GRPOTrainer on posttrain's single-turn tasks (bench/real_rl.py's peer): the same model,
prompts in the model's chat template, group size, reply budget, reward (the suite's scorer),
LoRA, bf16 and threads, stopped once its training has run for a given wall time.

Each step's time is split as TRL's own methods divide it: `_generate` (sampling), the rest of
`_prepare_inputs` (rewards, advantages), `compute_loss` (the forward pass and log-probabilities)
and what remains of the step (backward, clipping, the optimizer).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from posttrain.models.tiny import load_policy
from posttrain.tasks import Task
from posttrain.tasks.suites import score_reply


def grpo_flags(run: dict) -> dict:
    """Every GRPOConfig field the run sets (all else TRL's default; no vLLM): the JSON's
    peer_flags. `run` holds the posttrain recipe's settings the peer must match."""
    return dict(per_device_train_batch_size=run["groups_per_step"] * run["group_size"],
                num_generations=run["group_size"], max_completion_length=run["max_tokens"],
                learning_rate=run["lr"], max_steps=10_000, use_cpu=True, bf16=run["dtype"] == "bf16",
                report_to="none", logging_steps=1, beta=0.0, temperature=1.0, loss_type="grpo",
                save_strategy="no", seed=run["seed"], optim="adamw_torch", lr_scheduler_type="constant",
                max_grad_norm=1.0, weight_decay=0.0, adam_beta2=0.99)


def lora_config(run: dict):
    from peft import LoraConfig

    from posttrain.train.lora import LORA_TARGETS

    return LoraConfig(r=run["lora_rank"], lora_alpha=run["lora_alpha"], lora_dropout=0.0,
                      target_modules=list(LORA_TARGETS), task_type="CAUSAL_LM")


class _Timed:
    """Wraps bound methods of one object and sums each one's wall time."""

    def __init__(self, obj, names: tuple[str, ...]):
        self.totals = dict.fromkeys(names, 0.0)
        for name in names:
            setattr(obj, name, self._wrap(name, getattr(obj, name)))

    def _wrap(self, name, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[name] += time.perf_counter() - t0
        return timed


def _stop_after(wall_s: float):
    """A TrainerCallback that ends training after the step that passes wall_s."""
    from transformers import TrainerCallback

    class StopAfter(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if time.perf_counter() - self.t0 >= wall_s:
                control.should_training_stop = True

    return StopAfter()


def _dataset(tasks: list[Task]):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": t.instruction.strip()}],
                               "meta": json.dumps(t.config.metadata)} for t in tasks])


def _reward(completions, meta, **_):
    return [score_reply(json.loads(m), c[-1]["content"])[0] for c, m in zip(completions, meta)]


def trl_grpo(init: Path, tasks: list[Task], run: dict, wall_s: float, out: Path) -> tuple[dict, object]:
    """(rates, step time split and rewards of TRL GRPOTrainer trained for wall_s seconds, its
    final policy with the adapters merged)."""
    from trl import GRPOConfig, GRPOTrainer, __version__

    model, tok = load_policy(init)
    trainer = GRPOTrainer(model=model, reward_funcs=_reward, train_dataset=_dataset(tasks),
                          args=GRPOConfig(output_dir=str(out), **grpo_flags(run)), processing_class=tok,
                          peft_config=lora_config(run) if run["lora_rank"] else None,
                          callbacks=[_stop_after(wall_s)])
    timed = _Timed(trainer, ("_generate", "_prepare_inputs", "compute_loss"))
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    policy = trainer.model.merge_and_unload() if run["lora_rank"] else trainer.model
    return {"trl_version": __version__, **rates(trainer.state.global_step, wall, timed.totals, run),
            "reward_curve": [round(r, 4) for r in rewards]}, policy.eval()


def rates(steps: int, wall: float, totals: dict, run: dict) -> dict:
    """Steps and trajectories per second over the training wall time, and the mean step split
    from the timed methods' totals: `_prepare_inputs` includes `_generate`, and what neither
    it nor `compute_loss` took is the backward pass and the optimizer."""
    split = {"generation_s": totals["_generate"],
             "rewards_s": totals["_prepare_inputs"] - totals["_generate"], "logprobs_s": totals["compute_loss"],
             "backward_optimizer_s": wall - totals["_prepare_inputs"] - totals["compute_loss"]}
    return {"steps": steps, "train_wall_s": round(wall, 1), "steps_per_s": round(steps / wall, 5),
            "trajectories_per_s": round(steps * run["groups_per_step"] * run["group_size"] / wall, 3),
            "step_split_s": {k: round(v / max(steps, 1), 2) for k, v in split.items()}}
