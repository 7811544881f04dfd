"""The base of posttrain's typed configs: a pydantic model that refuses unknown keys, so a
misspelt key is an error that names it. Imports pydantic only."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
