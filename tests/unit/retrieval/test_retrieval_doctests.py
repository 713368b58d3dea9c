"""The runnable examples of the read side's modules stay true; the filter parser names what is wrong."""

from __future__ import annotations

import doctest
import importlib

import pytest

from memory_ext import InvalidQueryError
from memory_ext.store.filters import RecordFilter, filter_sql

MODULES = ["memory_ext.recall.channels", "memory_ext.store.filters", "memory_ext.retrieval.request",
           "memory_ext.models", "memory_ext.plan.llm_planner", "memory_ext.retrieval.slots",
           "memory_ext.retrieval.phrases"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, f"{result.failed} docstring example(s) failed in {name}"


def test_filters_become_one_sql_condition() -> None:
    flt = RecordFilter.parse({"session_id": ["s1", "s2"], "role": "user", "kinds": ("fact",),
                              "until": "2023-05-01T00:00:00Z"}, session_id="s9")
    assert filter_sql(flt) == ("session_id = ? AND session_id IN (?,?) AND source_role IN (?) AND kind IN (?) "
                               "AND ref_ts <= ?", ["s9", "s1", "s2", "user", "fact", 1682899200.0])
    assert RecordFilter.parse(None, None).empty and RecordFilter.parse({"speaker": None}, None).empty


@pytest.mark.parametrize(("filters", "field"), [
    ({"speaker": []}, "filters.speaker"),
    ({"role": [1]}, "filters.role"),
    ({"since": "not a date"}, "filters.since"),
    ("session_id=s1", "filters"),
])
def test_bad_filters_name_the_key(filters: object, field: str) -> None:
    with pytest.raises(InvalidQueryError) as info:
        RecordFilter.parse(filters, None)  # type: ignore[arg-type]
    assert info.value.field == field
