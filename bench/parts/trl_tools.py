"""Can TRL's GRPOTrainer train SmolLM2-135M-Instruct on the tool-use suite? Its tools mode and its
`environment_factory` both need a chat template that renders a whole tool-calling conversation
(user, assistant with tool_calls, tool); this builds the trainer the way its docs show, with an
environment whose methods are the suite's tools, and records what it says."""

from __future__ import annotations

from pathlib import Path


class KeyValueEnv:
    """The kv family's tools as a TRL environment (one instance per rollout)."""

    def reset(self, **kwargs) -> None:
        self.store: dict[str, str] = {}

    def kv_get(self, key: str) -> str:
        """Read the value stored under a key.

        Args:
            key: the key's name
        """
        return self.store.get(key, f"error: no key {key!r}")

    def kv_set(self, key: str, value: str) -> str:
        """Store a value under a key.

        Args:
            key: the key's name
            value: the value
        """
        self.store[key] = value
        return "ok"


def trl_tool_support(model_dir: Path, out: Path) -> dict:
    """{"trl": version, "builds": bool, "error": the trainer's message when it refuses}."""
    try:
        import trl
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as e:
        return {"trl": None, "builds": None,
                "error": f"not checked: {e.name} is not installed (pip install -c constraints.txt -e '.[bench]')"}
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "Copy key a to key b."}]}] * 4)
    args = GRPOConfig(output_dir=str(out), use_cpu=True, per_device_train_batch_size=4,
                      num_generations=4, max_steps=1, report_to="none", save_strategy="no")
    try:
        GRPOTrainer(model=model, processing_class=tok, args=args, train_dataset=data,
                    reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                    environment_factory=KeyValueEnv)
    except (ValueError, ImportError) as e:
        return {"trl": trl.__version__, "builds": False, "error": str(e)}
    return {"trl": trl.__version__, "builds": True, "error": ""}
