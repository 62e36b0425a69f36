"""Argument validation: every checker accepts its range and names the parameter and range when refusing."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theory import validation as v


def test_check_int_accepts_integral_values():
    assert v.check_int("d", 5, minimum=2) == 5
    assert v.check_int("d", np.int64(7), minimum=2) == 7
    assert v.check_int("d", 4.0, minimum=2) == 4


@pytest.mark.parametrize("bad", [1, 1.5, "3", True, None, float("nan")])
def test_check_int_refuses_and_names_parameter(bad):
    with pytest.raises(ValueError, match=r"^d must be an integer >= 2"):
        v.check_int("d", bad, minimum=2)


def test_check_rank_names_range():
    with pytest.raises(ValueError, match=r"r must be an integer in \[1, 8\], got 9"):
        v.check_rank(9, 8)
    assert v.check_rank(8, 8) == 8


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_check_temperature_accepts_exactly_positive_or_inf(x):
    if x > 0:
        assert v.check_temperature(x) == x
    else:
        with pytest.raises(ValueError, match="temperature"):
            v.check_temperature(x)


def test_check_real_refuses_non_finite_unless_allowed():
    with pytest.raises(ValueError, match="eps must be a finite number"):
        v.check_real("eps", math.inf, minimum=0.0)
    with pytest.raises(ValueError, match="eps must be a finite number"):
        v.check_real("eps", math.nan)
    assert v.check_real("t", math.inf, allow_inf=True) == math.inf


def test_check_probability_strict_range():
    assert v.check_probability("eps", 0.25) == 0.25
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="eps must be a real number with 0.0 < value < 1.0"):
            v.check_probability("eps", bad)


def test_check_array_shape_and_finiteness():
    arr = v.check_array("Q", np.zeros((2, 3, 4)), shape=(2, None, 4))
    assert arr.dtype == np.float64
    with pytest.raises(ValueError, match=r"Q must have shape \(2, \*, 5\), got \(2, 3, 4\)"):
        v.check_array("Q", np.zeros((2, 3, 4)), shape=(2, None, 5))
    with pytest.raises(ValueError, match="X must contain only finite values"):
        v.check_array("X", [1.0, np.nan])
    with pytest.raises(ValueError, match="y must have 2 dimensions"):
        v.check_array("y", np.zeros(3), ndim=2)


def test_check_choice_and_generator():
    assert v.check_choice("keys", "iid", ("iid", "orthonormal")) == "iid"
    with pytest.raises(ValueError, match="keys must be one of 'iid', 'orthonormal', got 'gauss'"):
        v.check_choice("keys", "gauss", ("iid", "orthonormal"))
    with pytest.raises(ValueError, match="rng must be a numpy.random.Generator"):
        v.check_generator(np.random.RandomState(0))
