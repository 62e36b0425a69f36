"""Argument validation: every checker accepts its range and names the parameter and range when refusing."""

import math
import os

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


# --- switches, types and paths -------------------------------------------------------------------------------------


def test_check_bool_accepts_only_true_and_false():
    assert v.check_bool("pack", True) is True
    assert v.check_bool("pack", np.bool_(False)) is False
    for bad in (None, 0, 1, "yes", 1.0):
        with pytest.raises(TypeError, match=r"^pack must be True or False, got "):
            v.check_bool("pack", bad)


def test_check_instance_names_the_parameter_and_the_type_given():
    assert v.check_instance("x", 3, int) == 3
    assert v.check_instance("m", {}, (dict, list)) == {}
    with pytest.raises(TypeError, match=r"^weights must be a WeightFile \(from load_weights\), got dict$"):
        v.check_instance("weights", {}, int, "a WeightFile (from load_weights)")
    with pytest.raises(TypeError, match=r"^m must be a dict or a list, got NoneType$"):
        v.check_instance("m", None, (dict, list))


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (None, TypeError, "must be a path"),
        (b"file", TypeError, "must be a path"),
        (3, TypeError, "must be a path"),
        ("", ValueError, "empty path"),
        ("  ", ValueError, "empty path"),
        ("a\x00b", ValueError, "NUL byte"),
    ],
)
def test_check_path_refuses_what_is_not_a_path(bad, error, message):
    with pytest.raises(error, match=rf"^path .*{message}"):
        v.check_path("path", bad)


def test_input_paths_raise_the_os_error_the_file_system_would(tmp_path):
    file = tmp_path / "f.txt"
    file.write_text("x")
    assert v.check_existing_file("path", str(file)) == file
    assert v.check_existing_dir("out_dir", tmp_path) == tmp_path
    cases = [
        (v.check_existing_file, tmp_path / "missing", FileNotFoundError),
        (v.check_existing_file, tmp_path, IsADirectoryError),
        (v.check_existing_dir, tmp_path / "missing", FileNotFoundError),
        (v.check_existing_dir, file, NotADirectoryError),
        (v.check_existing_file, tmp_path / ("n" * 300), OSError),  # ENAMETOOLONG while looking it up
    ]
    for check, path, error in cases:
        with pytest.raises(error) as caught:
            check("arg", path)
        assert caught.value.strerror.startswith("arg ") and caught.value.filename == str(path)


def test_output_paths_are_refused_before_anything_is_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    deep = tmp_path / "new" / "deeper" / "f.safetensors"
    assert v.check_output_file("path", deep) == deep
    assert v.check_output_dir("out", tmp_path / "new" / "dir") == tmp_path / "new" / "dir"
    cases = [
        (v.check_output_file, tmp_path, IsADirectoryError),
        (v.check_output_file, blocker / "child", NotADirectoryError),
        (v.check_output_file, "/proc/attnrank-test/x.safetensors", OSError),  # nothing can be created in /proc
        (v.check_output_dir, blocker, NotADirectoryError),
        (v.check_output_dir, blocker / "sub", NotADirectoryError),
    ]
    for check, path, error in cases:
        with pytest.raises(error) as caught:
            check("out", path)
        assert caught.value.strerror.startswith("out"), caught.value
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere" / "deeper")
    with pytest.raises(FileNotFoundError, match="broken symbolic link"):
        v.check_output_file("out", link / "f.safetensors")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "file"]  # the checks created nothing


def test_an_existing_read_only_file_is_refused_as_output(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root may write any file; the permission check cannot fail here")
    target = tmp_path / "ro.safetensors"
    target.write_text("x")
    target.chmod(0o444)
    with pytest.raises(PermissionError, match="out exists and is not writable"):
        v.check_output_file("out", target)
