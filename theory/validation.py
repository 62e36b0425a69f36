"""Argument validation shared by every public function of the toolkit.

Each checker returns the validated (and normalised) value or raises ``ValueError`` whose message names the
parameter, the allowed range and the offending value, e.g. ``"d must be an integer >= 2, got 1"``. The command
line turns these errors into one line on stderr and exit status 2.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Validate an integer parameter (bools and non-integral floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer():
            value = int(float(value))
        else:
            raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}, got {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}, got {value}")
    return value


def check_real(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
    strict_maximum: bool = False,
    allow_inf: bool = False,
) -> float:
    """Validate a real scalar: finite (or +inf when ``allow_inf``) and inside the given range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        allowed = _range_text(minimum, maximum, strict_minimum, strict_maximum)
        raise ValueError(f"{name} must be a real number{allowed}, got {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not (allow_inf and value > 0)):
        allowed = _range_text(minimum, maximum, strict_minimum, strict_maximum)
        raise ValueError(f"{name} must be a finite number{allowed}, got {value}")
    too_low = minimum is not None and (value <= minimum if strict_minimum else value < minimum)
    too_high = maximum is not None and (value >= maximum if strict_maximum else value > maximum)
    if too_low or too_high:
        raise ValueError(
            f"{name} must be a real number{_range_text(minimum, maximum, strict_minimum, strict_maximum)}, got {value}"
        )
    return value


def check_dimension(d: Any, *, name: str = "d", minimum: int = 2) -> int:
    """The ambient dimension: an integer >= 2 (the sphere S^{d-1} needs d >= 2)."""
    return check_int(name, d, minimum=minimum)


def check_rank(r: Any, d: int, *, name: str = "r") -> int:
    """A query/key rank: an integer with 1 <= r <= d."""
    return check_int(name, r, minimum=1, maximum=d)


def check_heads(h: Any, *, name: str = "H") -> int:
    """A head count: an integer >= 1."""
    return check_int(name, h, minimum=1)


def check_temperature(temperature: Any, *, name: str = "temperature") -> float:
    """A softmax inverse temperature: a number > 0; ``math.inf`` means hardmax."""
    return check_real(name, temperature, minimum=0.0, strict_minimum=True, allow_inf=True)


def check_probability(name: str, value: Any, *, strict: bool = True) -> float:
    """A number in (0, 1) (or [0, 1] when ``strict`` is False)."""
    return check_real(name, value, minimum=0.0, maximum=1.0, strict_minimum=strict, strict_maximum=strict)


def check_array(
    name: str,
    value: Any,
    *,
    ndim: int | None = None,
    shape: tuple[int | None, ...] | None = None,
    finite: bool = True,
) -> npt.NDArray[np.float64]:
    """Convert to a float64 array and check its rank, shape (``None`` = any size) and finiteness."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers, got {type(value).__name__}") from exc
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    if shape is not None:
        if array.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, array.shape, strict=True)):
            expected = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {expected}, got {array.shape}")
    if finite and not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must contain only finite values")
    return array


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """A string parameter restricted to ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
    return str(value)


def check_generator(rng: Any, *, name: str = "rng") -> np.random.Generator:
    """Library randomness always comes from an explicit ``numpy.random.Generator``."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"{name} must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), got {type(rng).__name__}"
        )
    return rng


def _range_text(
    minimum: float | None, maximum: float | None, strict_minimum: bool = False, strict_maximum: bool = False
) -> str:
    low = ">" if strict_minimum else ">="
    high = "<" if strict_maximum else "<="
    if minimum is not None and maximum is not None:
        return (
            f" in [{minimum}, {maximum}]"
            if not (strict_minimum or strict_maximum)
            else f" with {minimum} {'<' if strict_minimum else '<='} value {high} {maximum}"
        )
    if minimum is not None:
        return f" {low} {minimum}"
    if maximum is not None:
        return f" {high} {maximum}"
    return ""
