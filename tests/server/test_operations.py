"""The operation table (memory_ext.operations) is the one declaration of the engine API over the wire: every row
has its REST route, a RemoteEngine method with the engine's signature, an EngineLike member, and an MCP tool or
a stated exemption; and nothing is exposed that is not a row."""

from __future__ import annotations

import asyncio
import inspect
import typing
from typing import Any

import pytest
from fastapi.routing import APIRoute

from memory_ext import EngineLike, MemoryEngine
from memory_ext.client import RemoteEngine
from memory_ext.errors import InvalidArgumentError
from memory_ext.operations import NOT_OPERATIONS, OPERATION, OPERATIONS, Operation
from memory_ext.server.mcp_tools import build_mcp
from memory_ext.server.rest import EXTRA_ROUTES, HANDLERS, build_router
from memory_ext.server.rest_items import build_items_router


def _routes() -> dict[tuple[str, str], APIRoute]:
    routes = [*build_router().routes, *build_items_router().routes]
    return {(method, route.path): route for route in routes if isinstance(route, APIRoute) for method in route.methods}


def _shape(fn: Any) -> list[tuple[str, Any, Any, Any]]:
    """A method's parameters: name, kind, default and resolved annotation (aliases like TimeLike compare equal
    to the union they stand for)."""
    hints = typing.get_type_hints(fn)
    return [(p.name, p.kind, p.default, hints.get(p.name)) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_every_row_has_its_route_with_the_rows_summary(op: Operation) -> None:
    route = _routes().get((op.method, op.path))
    assert route is not None, f"no {op.method} {op.path}"
    assert route.summary == op.summary and route.tags == [op.tag] and route.name == (op.route_name or op.name)


def test_every_route_is_a_row_or_a_listed_extra() -> None:
    rows = {(op.method, op.path) for op in OPERATIONS}
    extra = set(_routes()) - rows
    assert extra == set(EXTRA_ROUTES)
    assert len(rows) == len(OPERATIONS), "two rows share a route"


def test_custom_rows_have_handlers_and_the_others_a_body_model() -> None:
    assert {op.name for op in OPERATIONS if op.custom} == set(HANDLERS)
    assert all(op.request is not None for op in OPERATIONS if not op.custom)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_the_remote_engine_has_the_engines_signature_sync_and_async(op: Operation) -> None:
    for name in (op.name, "a" + op.name):
        engine_method, remote_method = getattr(MemoryEngine, name), getattr(RemoteEngine, name)
        assert _shape(remote_method) == _shape(engine_method), name
        assert typing.get_type_hints(remote_method)["return"] == typing.get_type_hints(engine_method)["return"] \
            or name in ("export",), name  # export: the engine streams an iterator, the client returns the list
        assert asyncio.iscoroutinefunction(remote_method) == (name != op.name), name
        assert name in vars(EngineLike), f"EngineLike lacks {name}"


def test_every_engine_like_member_is_a_row_or_listed() -> None:
    covered = {op.name for op in OPERATIONS} | {"a" + op.name for op in OPERATIONS} | set(NOT_OPERATIONS)
    members = {name for name in vars(EngineLike) if not name.startswith("_")}
    assert members == covered


def test_every_row_has_an_mcp_tool_or_says_why_not() -> None:
    tools = {tool.name for tool in asyncio.run(build_mcp(lambda: None).list_tools())}  # type: ignore[arg-type,return-value]
    for op in OPERATIONS:
        assert (op.mcp in tools) != bool(op.mcp_exempt), op.name


def test_a_client_body_with_a_field_the_model_lacks_is_refused() -> None:
    body = OPERATION["history"].body({"user_id": "ana", "id": "m1"})
    assert body == {"user_id": "ana", "id": "m1"}
    with pytest.raises(InvalidArgumentError) as caught:
        OPERATION["history"].body({"user_id": "ana", "memory": "m1"})
    assert caught.value.field == "body" and caught.value.value == ["memory"]
