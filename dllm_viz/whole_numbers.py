"""What counts as a whole number where the library takes a count, an index, a seed or a token id.

An `Integral` that is not a bool: numpy's integer types are whole numbers too, while True (read
as 1), 2.5 (truncated or failing deep inside numpy / torch / random) and "3" are not. Each caller
keeps its own message, naming its argument and the fix; the test is declared here once.
"""

from __future__ import annotations

from numbers import Integral


def is_whole(value: object) -> bool:
    """True for Python and numpy integers, False for bools, floats, strings and anything else."""
    return isinstance(value, Integral) and not isinstance(value, bool)
