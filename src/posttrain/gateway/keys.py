"""API keys: `pt-<id>-<secret>`; the config stores only the id, a salt and sha256(salt + secret)."""

from __future__ import annotations

import hashlib
import json
import hmac
import secrets

from posttrain.gateway.config import Key

PREFIX = "pt-"


def hash_secret(salt: str, secret: str) -> str:
    # The secret is 192 random bits, so one salted SHA-256 is enough (no password stretching):
    # a stolen config cannot be reversed, and checking a key costs about a microsecond.
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


def new_key(name: str, **limits) -> tuple[str, Key]:
    """A fresh key: (the secret to hand out once, the record to put in the config)."""
    key_id, secret, salt = secrets.token_hex(4), secrets.token_urlsafe(24), secrets.token_hex(16)
    record = Key(name=name, id=key_id, salt=salt, hash=hash_secret(salt, secret), **limits)
    return f"{PREFIX}{key_id}-{secret}", record


def key_toml(record: Key) -> str:
    lines = ["[[keys]]"]
    for field, value in record.model_dump(exclude_none=True).items():
        lines.append(f"{field} = {json.dumps(value)}")  # JSON strings, lists, numbers, booleans are TOML too
    return "\n".join(lines) + "\n"


class KeyRing:
    """Looks a presented bearer token up by its id and checks the salted hash."""

    def __init__(self, keys: list[Key]):
        self.by_id = {k.id: k for k in keys}

    @property
    def enabled(self) -> bool:
        return bool(self.by_id)

    def check(self, authorization: str | None) -> Key | None:
        """The key record for an `Authorization: Bearer pt-...` header, or None."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        token = authorization[7:].strip()
        if not token.startswith(PREFIX):
            return None
        key_id, _, secret = token[len(PREFIX):].partition("-")
        record = self.by_id.get(key_id)
        if record is None or not secret:
            return None
        if not hmac.compare_digest(hash_secret(record.salt, secret), record.hash):
            return None
        return record


def key_label(record: Key | None) -> str:
    """What logs and metrics show for a key: a prefix of its stored hash, never the secret."""
    return record.hash[:16] if record else "anonymous"
