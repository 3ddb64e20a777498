"""The bridge's protocol pieces every method module shares: the registry and the params checks.

Methods are a plain registry (`METHODS`: name -> function(archive, params)); a
module adds its own with `@method("name")`. A bad param is one `BadParams`
with one clear message (the server answers it as `bad_params`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...archive import Archive
from ...errors import BadInput

Handler = Callable[[Archive, dict[str, Any]], Any]
METHODS: dict[str, Handler] = {}


class BadParams(BadInput):
    """A request whose params are missing or of the wrong type."""


def method(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        METHODS[name] = fn
        return fn

    return register


# --- params: small checked getters, one clear message each ----------------------------


def req_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadParams(f"{key} is required (a non-empty string)")
    return value


def opt_str(params: dict[str, Any], key: str) -> str | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadParams(f"{key} must be a string")
    return value


def opt_int(params: dict[str, Any], key: str, default: int | None, lo: int = 0, hi: int = 1 << 62) -> int | None:
    value = params.get(key)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise BadParams(f"{key} must be an integer")  # NaN and Infinity (which JSON.parse never gives) included
    return max(lo, min(int(value), hi))


def opt_bool(params: dict[str, Any], key: str, default: bool = False) -> bool:
    value = params.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadParams(f"{key} must be true or false")
    return value


def req_dict(params: dict[str, Any], key: str) -> dict[str, Any]:
    value = params.get(key)
    if not isinstance(value, dict):
        raise BadParams(f"{key} is required (a JSON object)")
    return value


def req_list(params: dict[str, Any], key: str) -> list[Any]:
    value = params.get(key)
    if not isinstance(value, list):
        raise BadParams(f"{key} is required (a JSON array)")
    return value
