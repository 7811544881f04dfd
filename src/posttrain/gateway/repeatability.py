"""Whether greedy replies can repeat on a backend: the compute dtype it reports.

`posttrain serve` lists its dtype in /v1/models (`posttrain.dtype` of the model's entry). Greedy
repeats in float32; in bfloat16 a cold prefill and a prefix-cached decode can pick different
tokens (docs/gateway.md). A backend that reports no dtype is taken as it is: unknown.
"""

from __future__ import annotations

import httpx

BF16 = "bfloat16"


def listed_dtype(models_body: dict, model: str) -> str | None:
    """The dtype a /models body reports for `model`, or None when it reports none."""
    for entry in models_body.get("data") or []:
        if isinstance(entry, dict) and entry.get("id") == model and isinstance(entry.get("posttrain"), dict):
            return entry["posttrain"].get("dtype")
    return None


def backend_dtype(base_url: str, model: str, client: httpx.Client) -> str | None:
    """The dtype the backend at base_url (ending in /v1) reports for `model`; None if unknown or unreachable."""
    try:
        r = client.get(f"{base_url.rstrip('/')}/models")
        return listed_dtype(r.json(), model) if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def variant_dtypes(gateway_url: str, variant: str, client: httpx.Client) -> dict[str, str | None]:
    """Each backend of `variant` and the dtype it reported, from the gateway's /health."""
    root = gateway_url.rstrip("/").removesuffix("/v1")
    try:
        backends = client.get(f"{root}/health").json()["backends"]
    except (httpx.HTTPError, ValueError, KeyError):
        return {}
    return {url: b.get("dtype") for url, b in backends.items() if b.get("variant") == variant}


def bf16_warning(dtypes: dict[str, str | None], what: str) -> str | None:
    """One line naming the bfloat16 backends, or None when there are none."""
    bf16 = [url for url, d in dtypes.items() if d == BF16]
    if not bf16:
        return None
    return (f"{', '.join(bf16)} run{'s' if len(bf16) == 1 else ''} bfloat16: greedy replies can differ between a cold "
            f"prefill and a cached prefix, so {what} (serve with --dtype float32 to compare exactly)")
