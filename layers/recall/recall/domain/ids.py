"""Time-ordered identifiers (ULIDs) so sort keys follow creation order."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = 0
_last_random = 0


def encode(value: int, length: int) -> str:
    """``value`` in ``length`` characters of the ULID alphabet (Crockford's base 32)."""
    chars = []
    for _ in range(length):
        value, index = divmod(value, 32)
        chars.append(_ALPHABET[index])
    return "".join(reversed(chars))


def new_id() -> str:
    """A ULID, strictly increasing within this process even inside one millisecond."""
    global _last_ms, _last_random
    with _lock:
        now_ms = int(time.time() * 1000)
        if now_ms <= _last_ms:
            now_ms = _last_ms
            _last_random += 1
        else:
            _last_random = int.from_bytes(os.urandom(10), "big") >> 1
        _last_ms = now_ms
        return encode(now_ms, 10) + encode(_last_random, 16)


def is_id(value: str) -> bool:
    return len(value) == 26 and all(char in _ALPHABET for char in value)
