"""Strict JSON reading: :func:`strict_loads` refuses ``NaN``, ``Infinity``,
``-Infinity`` and a number too large for a float (``1e999``) with a ValueError naming
the value, as the API refuses to write them.
"""

from __future__ import annotations

import json
import math


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text:.40} is beyond the range of a float")
    return value


STRICT_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
"""A decoder refusing NaN, the infinities and numbers that overflow a float."""


def strict_loads(text: str | bytes) -> object:
    """``json.loads(text)`` for strict JSON (see the module), its other errors and its
    handling of bytes included; raises ValueError for a value that is not JSON."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
