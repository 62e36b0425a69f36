"""Text from files made safe for a terminal: control characters shown as escapes, never sent raw.

A weight file's metadata, a checkpoint's config, an import record's notes are text someone else wrote. Printed raw,
a newline in them forges extra output lines (a refusal is promised to be one line), and an escape sequence
(``\\x1b[2J``, a bidirectional override) rewrites what the terminal shows. Every line a command prints from such
text goes through `printable` first: `experiments.cli.output.emit` and `warn` for results and warnings, and
`experiments.cli.main`'s one error line.
"""

from __future__ import annotations

import unicodedata

UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories never sent to a terminal raw: controls (newline, ESC, DEL, C1), format characters (bidirectional
overrides, zero-width joiners), surrogates, private use, unassigned code points, line and paragraph separators."""


def printable(text: object) -> str:
    """``str(text)`` with every character of `UNPRINTABLE_CATEGORIES` written as its Python escape (``\\n``,
    ``\\x1b``, ``\\u202e``), so that it shows as text on one line and cannot steer the terminal."""
    value = str(text)
    if value.isprintable():  # the common case: nothing to escape (isprintable is False for every category above)
        return value
    return "".join(
        char.encode("unicode_escape").decode("ascii") if unicodedata.category(char) in UNPRINTABLE_CATEGORIES else char
        for char in value
    )
