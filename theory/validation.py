"""Argument validation shared by every public function of the toolkit.

Each checker returns the validated (and normalised) value or raises an exception whose message starts with the
parameter's name, then the allowed range and the offending value, e.g. ``"d must be an integer >= 2, got 1"``:

- numbers and choices (``check_int``, ``check_real``, ``check_choice``, ...): ``ValueError``, also for a value of the
  wrong type (``d=None``), as they always have;
- objects of the wrong type (``check_instance``, ``check_bool``, ``check_path``): ``TypeError``;
- paths (``check_existing_file``, ``check_existing_dir``, ``check_output_file``, ``check_output_dir``,
  ``read_regular_file``): the
  ``OSError`` subclass the file system would raise later (``FileNotFoundError``, ``IsADirectoryError``,
  ``NotADirectoryError``, ``PermissionError``, ...), with ``strerror`` starting with the parameter's name and
  ``filename`` the path, so that ``str(exc)`` reads ``[Errno 21] path is a directory; ...: 'out'``.

The path checks are the one part of `theory` that looks at the file system; they sit here because every layer's
public functions need them and `theory` is the layer all others import. The command line turns all of these errors
into one line on stderr and exit status 2.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")


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


MAX_SEED = 2**63 - 1
"""The largest seed accepted anywhere (a run's seed and data seed, a construction's draw): the largest signed 64-bit
integer, which every generator here takes (``torch.Generator.manual_seed`` up to 2^64 - 1, so the seeds derived by
adding small offsets, `experiments.training.evaluation`, still fit; numpy's without bound) and SQLite stores exactly."""


def check_seed(name: str, value: Any) -> int:
    """Validate a seed: an integer from 0 to `MAX_SEED`."""
    return check_int(name, value, minimum=0, maximum=MAX_SEED)


MAX_SAMPLES = 10**9
"""The most samples any Monte Carlo estimate or fit draws (as many as a run's steps may be, `experiments.config.
MAX_STEPS`). 1e9 samples resolve a mean to 1 / sqrt(1e9) = 3e-5 of its standard deviation, beyond anything a check
here reads; the work grows linearly past it (a request for 1e11 samples ran for hours without a line of output)."""


def check_sample_count(name: str, value: Any, *, minimum: int = 2) -> int:
    """A number of samples: an integer in [minimum, `MAX_SAMPLES`] (ValueError naming ``name``, saying how far
    beyond the limit a huge count is)."""
    count = check_int(name, value, minimum=minimum)
    if count > MAX_SAMPLES:
        raise ValueError(
            f"{name} must be an integer in [{minimum}, {MAX_SAMPLES}], got {count} ({count / MAX_SAMPLES:.3g} times "
            "the most samples any estimate here draws: hours of work that resolve nothing 1e9 samples do not)"
        )
    return count


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


def check_bool(name: str, value: Any) -> bool:
    """A switch: ``True`` or ``False`` (numpy bools too); ``None``, 0, 1 and strings are refused (TypeError)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_instance(name: str, value: T, expected: type | tuple[type, ...], what: str | None = None) -> T:
    """An instance of ``expected`` (a class, an abstract base such as Mapping, or a tuple of them); else TypeError.

    Args:
        name: the parameter's name.  value: the argument.  expected: the accepted class(es).
        what: how to describe an acceptable value, e.g. "a WeightFile (from load_weights)"; default "a <class name>".
    Returns:
        ``value`` unchanged.
    """
    if not isinstance(value, expected):
        classes = expected if isinstance(expected, tuple) else (expected,)
        default = " or ".join(f"a {c.__name__}" for c in classes)
        raise TypeError(f"{name} must be {what or default}, got {type(value).__name__}")
    return value


def check_path(name: str, value: Any) -> Path:
    """A file-system path given as ``str`` or ``os.PathLike`` (TypeError otherwise, bytes included).

    An empty (or blank) string is refused rather than read as ``.``, and so is a NUL byte (ValueError).
    """
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a path (str or os.PathLike of str), got a {type(value).__name__} of bytes")
    if text.strip() == "":
        raise ValueError(f"{name} must name a path, got an empty path")
    if "\x00" in text:
        raise ValueError(f"{name} must name a path, got {text!r} (contains a NUL byte)")
    return Path(text)


def _named_os_error(exc: OSError, name: str, what: str, path: Path) -> OSError:
    """``exc`` as the same OSError subclass, its message naming the parameter: ``NAME WHAT (strerror)``."""
    code = exc.errno if exc.errno is not None else errno.EIO
    return type(exc)(code, f"{name} {what} ({exc.strerror or exc})", str(path))


def _status(name: str, path: Path) -> os.stat_result | None:
    """``os.stat(path)``, or None where nothing exists there; other failures (a name too long, a loop of links,
    no permission to look) are raised naming the parameter."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _named_os_error(exc, name, "cannot be looked up", path) from exc


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in words (for a refusal)."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def _refuse_special(name: str, path: Path, mode: int) -> None:
    """IsADirectoryError for a directory, OSError (EINVAL) for a FIFO, device or socket: reading one would block for
    ever (a FIFO without a writer) or never end (/dev/zero), so it is refused before anything is read."""
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, f"{name} is a directory, not a file", str(path))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, f"{name} is {_file_kind(mode)}, not a regular file", str(path))


def check_existing_file(name: str, value: Any) -> Path:
    """A path (``check_path``) to an existing, readable regular file (or a link to one); a directory, FIFO, device
    or socket is refused before anything reads it."""
    path = check_path(name, value)
    status = _status(name, path)
    if status is None:
        raise FileNotFoundError(errno.ENOENT, f"{name} is not an existing file (not found)", str(path))
    _refuse_special(name, path, status.st_mode)
    if not os.access(path, os.R_OK):
        raise PermissionError(errno.EACCES, f"{name} is not readable", str(path))
    return path


def read_regular_file(name: str, value: Any, *, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file (or a link to one), refusing anything else before a byte is read.

    The file is opened without blocking (``O_NONBLOCK``: opening a FIFO that has no writer returns at once) and its
    kind and size are taken from the open descriptor, so what is checked is what is read. Refused with the OSError the
    file system would raise, naming ``name``: a missing file, a directory, a FIFO, a device, a socket; a file of more
    than ``max_bytes`` bytes is refused (ValueError) before it is read.
    """
    path = check_path(name, value)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise FileNotFoundError(errno.ENOENT, f"{name} is not an existing file (not found)", str(path)) from exc
    except OSError as exc:
        raise _named_os_error(exc, name, "cannot be opened", path) from exc
    try:
        status = os.fstat(descriptor)
        _refuse_special(name, path, status.st_mode)
    except BaseException:
        os.close(descriptor)
        raise
    with os.fdopen(descriptor, "rb") as stream:
        if max_bytes is not None and status.st_size > max_bytes:
            raise ValueError(
                f"{name} is {status.st_size} bytes, more than the {max_bytes} bytes such a file may hold: {path}"
            )
        os.set_blocking(descriptor, True)
        try:
            data = stream.read() if max_bytes is None else stream.read(max_bytes + 1)  # a file growing meanwhile
        except OSError as exc:
            raise _named_os_error(exc, name, "cannot be read", path) from exc
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{name} is more than the {max_bytes} bytes such a file may hold: {path}")
    return data


def check_existing_dir(name: str, value: Any) -> Path:
    """A path (``check_path``) to an existing directory."""
    path = check_path(name, value)
    status = _status(name, path)
    if status is None:
        raise FileNotFoundError(errno.ENOENT, f"{name} is not an existing directory (not found)", str(path))
    if not stat.S_ISDIR(status.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, f"{name} is not a directory", str(path))
    return path


def check_output_file(name: str, value: Any) -> Path:
    """A file the caller will write, checked before anything is computed; nothing is created here.

    Refused: what ``check_path`` refuses, an existing directory, an existing file that is not writable, a parent
    that is a file, and a location where no file can be created (the nearest existing ancestor is probed with a
    temporary file, removed at once). Missing parent directories are allowed: the writer creates them.
    """
    path = check_path(name, value)
    status = _status(name, path)
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{name} is a directory; name a file inside it", str(path))
        if not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, f"{name} exists and is not writable", str(path))
    _check_creatable(name, path.parent, path)
    return path


def check_output_dir(name: str, value: Any) -> Path:
    """A directory the caller will create or write into, checked before anything is computed or created."""
    path = check_path(name, value)
    status = _status(name, path)
    if status is not None and not stat.S_ISDIR(status.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, f"{name} exists and is not a directory", str(path))
    _check_creatable(name, path, path)
    return path


def _check_creatable(name: str, directory: Path, shown: Path) -> None:
    """The nearest existing ancestor of ``directory`` must be a directory where a file can be created."""
    ancestor = directory if str(directory) else Path(".")
    while _status(name, ancestor) is None:
        if ancestor.is_symlink():  # a dangling link: the directory can never be created through it
            raise FileNotFoundError(errno.ENOENT, f"{name}: {str(ancestor)!r} is a broken symbolic link", str(shown))
        parent = ancestor.parent
        if parent == ancestor:
            break
        ancestor = parent
    if not ancestor.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{name}: {str(ancestor)!r} is not a directory", str(shown))
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise _named_os_error(exc, name, f"cannot be written: cannot write in {str(ancestor)!r}", shown) from exc


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
