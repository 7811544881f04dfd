"""Runs inside vLLM's worker processes (`--worker-extension-cls`): loads new weights from a
safetensors directory (on one host: /dev/shm) and reports the version it holds.

vLLM mixes this class into its worker; methods are called with `collective_rpc`, which the
server exposes as POST /collective_rpc in dev mode. It imports only torch and safetensors,
so it loads in vLLM's own Python environment. Arguments arrive as strings (vLLM's rule
for that route).
"""

from __future__ import annotations

import os


class WeightSyncExtension:
    """Mixed into vLLM's Worker: `self.model_runner.model` is the served model."""

    def posttrain_load_weights(self, directory: str, version: str) -> dict:
        """Load every *.safetensors file in `directory` into the served model as `version`,
        through vLLM's in-place reload (it restores kernel-packed layers, such as the CPU
        backend's oneDNN linears, loads, and packs again). A failure leaves the version at -1:
        the weights may be mixed."""
        from safetensors import safe_open

        files = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
        if not files:
            raise FileNotFoundError(f"no .safetensors files in {directory}")
        self.posttrain_version = -1  # from here until the end, the weights may be mixed
        loaded = 0

        def tensors():
            nonlocal loaded
            for name in files:
                with safe_open(os.path.join(directory, name), framework="pt") as f:
                    for key in f.keys():
                        loaded += 1
                        yield key, f.get_tensor(key)

        self.model_runner.reload_weights(weights_iterator=tensors(), is_checkpoint_format=True)
        _repack_kept_weights(self.model_runner.model)
        self.posttrain_version = int(version)
        return {"version": self.posttrain_version, "tensors": loaded}

    def posttrain_weights_version(self) -> int:
        """The last fully loaded version; -1 after a failed load, 0 before any."""
        return getattr(self, "posttrain_version", 0)


def _repack_kept_weights(model) -> None:
    """The reload re-processes each layer it loads, but a tied lm_head is not loaded (it shares
    the embedding's weight), and on CPU it keeps a oneDNN copy packed from the old weight:
    pack again every layer that holds both its weight and a packed copy."""
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        weight = getattr(module, "weight", None)
        if hasattr(module, "cpu_linear") and method is not None and weight is not None and weight.numel():
            method.process_weights_after_loading(module)
