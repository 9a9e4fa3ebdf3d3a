"""The seal key: a secret from ``RAGEVAL_SEAL_KEY`` (the key itself) or ``RAGEVAL_SEAL_KEY_FILE`` (a
file holding it). It signs a run's seal (:mod:`rageval.tracking.seal`) and the content-addressed
cache's entries (:mod:`rageval.retrieval.cache`), so that whoever lacks it can forge neither."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rageval.errors import TrackingError

KEY_ENV = "RAGEVAL_SEAL_KEY"
KEY_FILE_ENV = "RAGEVAL_SEAL_KEY_FILE"


@dataclass(frozen=True)
class SealKey:
    """A seal key and where it came from. ``key_id`` names it without revealing it."""

    secret: bytes = field(repr=False)
    source: str

    @property
    def key_id(self) -> str:
        return hmac.new(self.secret, b"rageval-seal-key-id", hashlib.sha256).hexdigest()[:16]

    def sign(self, data: bytes) -> str:
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()


def seal_key(environ: Mapping[str, str] | None = None) -> SealKey | None:
    """The key of ``RAGEVAL_SEAL_KEY`` or the file ``RAGEVAL_SEAL_KEY_FILE`` names; ``None`` when
    neither is set. Surrounding whitespace (a file's last newline) is not part of the key."""
    environ = os.environ if environ is None else environ
    text, path = environ.get(KEY_ENV), environ.get(KEY_FILE_ENV)
    if text and path:
        raise TrackingError(f"both {KEY_ENV} and {KEY_FILE_ENV} are set: set one of them")
    if path:
        try:
            secret = Path(path).read_bytes().strip()
        except OSError as exc:
            raise TrackingError(f"{KEY_FILE_ENV}={path}: the seal key file cannot be read ({exc.strerror})") from None
        source = f"{KEY_FILE_ENV}={path}"
    elif text is not None and text != "":
        secret, source = text.strip().encode(), KEY_ENV
    else:
        return None
    if not secret:
        raise TrackingError(f"{source}: the seal key is empty")
    return SealKey(secret, source)
