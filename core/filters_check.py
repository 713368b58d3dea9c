"""Validation of search filter *values* (the keys are checked where the filter becomes SQL).

A typo in a filter value used to match nothing and look like "no memories"; now it is a typed error naming the
valid values.

>>> check_filter_values({"role": "user", "kinds": ["fact"]})
>>> check_filter_values({"role": "robot"})
Traceback (most recent call last):
...
memory_ext.errors.InvalidQueryError: filters.role: got 'robot'; valid roles: assistant, system, tool, user
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InvalidQueryError
from .models import Role
from .store.catalog import KIND_CODES

__all__ = ["VALID_FILTER_VALUES", "check_filter_values"]

VALID_FILTER_VALUES: dict[str, tuple[str, ...]] = {
    "role": tuple(sorted(r.value for r in Role)),
    "kinds": tuple(sorted(KIND_CODES)),
}
"""Filter keys whose values come from a closed set."""
_NAMES = {"role": "roles", "kinds": "kinds"}


def check_filter_values(filters: Mapping[str, Any] | None) -> None:
    """Raise :class:`InvalidQueryError` when ``role`` or ``kinds`` name a value that does not exist."""
    if not isinstance(filters, Mapping):
        return  # None, or a non-mapping that the SQL builder rejects with its own message
    for key, valid in VALID_FILTER_VALUES.items():
        value = filters.get(key)
        if value is None:
            continue
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, (list, tuple, set, frozenset)):
            continue  # the SQL builder names the type error
        for v in values:
            if isinstance(v, str) and v not in valid:
                raise InvalidQueryError(f"filters.{key}", v, f"valid {_NAMES[key]}: " + ", ".join(valid))
