"""``RemoteEngine``: the :class:`~memory_ext.MemoryEngine` API over HTTP, against a ``memext serve`` process.

Same methods (sync and ``a``-prefixed async twins), same return models, same typed errors: an error body from the
server becomes the :mod:`memory_ext.errors` class it names, with the server's message, field, value and fix. So
the framework faces work unchanged against a shared server::

    from memory_ext.client import RemoteEngine
    from langchain_memory_ext import MemoryRetriever

    engine = RemoteEngine("http://127.0.0.1:8765", token="...")
    retriever = MemoryRetriever(engine=engine, user_id="maya")

The constructor asks the server for its configuration (``GET /v1/info``), so a wrong URL or token fails at once.
Requests are built once (pure functions below); the sync client and the async client only send them. Errors of
the transport itself (refused connection, timeout) raise :class:`ServerUnavailableError`; a missing or unknown
token :class:`AuthenticationError` (401); a token pinned to another user :class:`PermissionDeniedError` (403); a
body over the server's ``max_body_bytes`` :class:`~memory_ext.errors.RequestTooLargeError` — raised before sending
when the server announced its limit in ``/v1/info``.
Needs the ``server`` extra (``httpx``).
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import quote

from pydantic import BaseModel

from . import errors as _errors
from .config import EngineConfig
from .engine import AddResult, ForgetReceipt, StoreStats
from .errors import MemoryExtError, MissingDependencyError
from .lifecycle.api import CompactionReport
from .lifecycle.items import ItemPut, MatchCondition, StoredItem
from .models import (
    ActionState,
    ChannelError,
    IndexHook,
    MemoryFile,
    Namespace,
    SearchResult,
    Turn,
)
from .operations import OPERATION, Operation
from .portability import ImportReport
from .results import Memory, MemoryPage, MemoryVersion, NamespaceSummary
from .wire import StoredTurn

try:
    import httpx
except ImportError:  # pragma: no cover - the server extra is missing
    raise MissingDependencyError("httpx", "server", "memory_ext.client.RemoteEngine") from None

__all__ = ["AuthenticationError", "PermissionDeniedError", "RemoteEngine", "RemoteError", "ServerUnavailableError"]

TimeLike = datetime | str | float | None
DEFAULT_TIMEOUT = 60.0


class RemoteError(MemoryExtError):
    """The server answered with an error that is not an engine error. ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int, type_: str = "RemoteError", field: str | None = None,
                 fix: str | None = None) -> None:
        self.status, self.type, self.field, self.fix = status, type_, field, fix
        super().__init__(message)


class AuthenticationError(RemoteError):
    """401: no token, or a token the server does not know."""


class PermissionDeniedError(RemoteError, PermissionError):
    """403: the token is pinned to another user (or may not call this endpoint)."""


class ServerUnavailableError(RemoteError, ConnectionError):
    """The server cannot be reached, timed out, or is not ready (503)."""


# -- pure pieces: requests and responses -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Call:
    """One request: an operation of the table (None: ``GET /v1/info``), its path, query and body."""

    op: Operation | None
    path: str
    params: dict[str, Any] | None = None
    body: Any = None
    content: bytes | None = None
    """A raw request body (``POST /v1/import``) instead of ``body`` as JSON."""

    @property
    def method(self) -> str:
        return self.op.method if self.op is not None else "GET"


def _op(name: str, *, body: Mapping[str, Any] | None = None, params: dict[str, Any] | None = None,
        content: bytes | None = None, **path_args: str) -> _Call:
    """The request of the table's row ``name``: its method and path, a body of its request model's fields."""
    op = OPERATION[name]
    return _Call(op, op.url(**path_args), params, op.body(body) if body is not None else None, content)


def _jsonable(value: Any) -> Any:
    """Turns, action states, datetimes, tuples and mappings as JSON values."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


def _ns_fields(namespace: Namespace | str | dict[str, Any]) -> dict[str, Any]:
    ns = Namespace.coerce(namespace)
    return {"user_id": ns.user_id, "agent_id": ns.agent_id, "session_id": ns.session_id}


def _ns_params(namespace: Namespace | str | dict[str, Any] | None, *, session: bool = True) -> dict[str, Any]:
    if namespace is None:
        return {}
    fields = _ns_fields(namespace)
    if not session:
        fields.pop("session_id")
    return {k: v for k, v in fields.items() if v is not None}


def _plain(turn: StoredTurn) -> Turn:
    return Turn.model_validate(turn.model_dump(exclude={"current"}))



def _partition(namespace: Namespace | str) -> dict[str, Any]:
    ns = Namespace.coerce(namespace)
    if ns.session_id is not None:
        raise _errors.InvalidNamespaceError("namespace.session_id", ns.session_id,
                                            "items belong to a (user_id, agent_id) partition; name the LangGraph "
                                            "namespace in each item instead of a session")
    return {"user_id": ns.user_id, "agent_id": ns.agent_id}


def _item_keys(keys: Iterable[tuple[Sequence[str], str]]) -> list[dict[str, Any]]:
    if isinstance(keys, (str, bytes, Mapping)):
        raise _errors.InvalidQueryError("keys", keys, "pass a list of (namespace, key) pairs")
    out = []
    for pair in keys:
        try:
            namespace, key = pair
        except (TypeError, ValueError):
            raise _errors.InvalidQueryError("keys", pair, "pass (namespace, key) pairs") from None
        out.append({"namespace": list(namespace), "key": key})
    return out


def _error(response: httpx.Response) -> MemoryExtError:
    """The typed error of an error response."""
    status = response.status_code
    unavailable = status in (502, 503, 504)
    try:
        payload = response.json()["error"]
        type_name, message = str(payload["type"]), str(payload["message"])
    except (ValueError, KeyError, TypeError):  # not our error body (a proxy, a crash)
        plain = ServerUnavailableError if unavailable else RemoteError
        return plain(f"HTTP {status} from the server: {response.text[:200]}", status=status)
    field_name, fix, value = payload.get("field"), payload.get("fix"), payload.get("value")
    if status == 413 or type_name == "RequestTooLargeError":
        limit = payload.get("limit")
        too_large = _errors.RequestTooLargeError(None, limit if isinstance(limit, int) else None, fix)
        too_large.args = (message,)  # the server's exact message
        return too_large
    if status == 401:
        return AuthenticationError(message, status=status, type_=type_name, field=field_name, fix=fix)
    if status == 403:
        return PermissionDeniedError(message, status=status, type_=type_name, field=field_name, fix=fix)
    found = getattr(_errors, type_name, None)
    cls: type[MemoryExtError]
    if isinstance(found, type) and issubclass(found, MemoryExtError):
        cls = found
    elif status in (400, 404, 422) and field_name is not None:  # a request body the server's schema refused
        cls = _errors.ValidationError
    else:
        remote = ServerUnavailableError if unavailable else RemoteError
        return remote(message, status=status, type_=type_name, field=field_name, fix=fix)
    exc: MemoryExtError
    if issubclass(cls, (_errors.ValidationError, _errors.ConfigError)):
        exc = cls(field_name or "", value, fix or "")
        if isinstance(exc, _errors.HookNotFoundError):
            exc.candidates = list(payload.get("candidates") or ())
    else:  # errors built from other arguments: same class, the server's attributes
        exc = cls.__new__(cls)
        Exception.__init__(exc)
        for name in ("field", "value", "fix"):
            setattr(exc, name, payload.get(name))
        if isinstance(exc, _errors.RetrievalError):
            exc.errors = [ChannelError(**e) for e in payload.get("channel_errors") or () if isinstance(e, dict)]
    exc.args = (message,)  # the server's exact message
    return exc


def _encode(call: _Call, limit: int | None) -> tuple[bytes | None, dict[str, str]]:
    """The body bytes of ``call`` (JSON as ``httpx`` writes it) and their headers; a body over ``limit`` (the
    server's ``max_body_bytes``) raises :class:`~memory_ext.errors.RequestTooLargeError` before it is sent."""
    if call.content is not None:
        content, headers = call.content, {}
    elif call.body is not None:
        content = json.dumps(_jsonable(call.body), ensure_ascii=False, separators=(",", ":"),
                             allow_nan=False).encode("utf-8")
        headers = {"Content-Type": "application/json"}
    else:
        return None, {}
    if limit is not None and len(content) > limit:
        raise _errors.RequestTooLargeError(len(content), limit)
    return content, headers


def _decode(call: _Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _error(response)
    if call.op is not None and call.op.lines:
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]
    data = response.json()
    return data if call.op is None else call.op.decode(data)


def _local_dir(url: str) -> Path:
    netloc = httpx.URL(url).netloc.decode("ascii", "replace")
    return Path("~/.memory_ext/remote").expanduser() / re.sub(r"[^A-Za-z0-9_.-]+", "_", netloc)


class RemoteEngine:
    """The engine API of a ``memext serve`` process at ``url`` (for example ``http://127.0.0.1:8765``).

    ``token`` is a bearer token the server was started with (None for a loopback server without tokens);
    ``timeout`` is per request, in seconds; ``path`` a local directory for state that a framework face keeps
    beside the memory (the LangGraph ``MemoryStore`` item table; default ``~/.memory_ext/remote/<host>_<port>``).
    ``transport`` (an ``httpx`` transport) is for tests.

    >>> engine = RemoteEngine("http://127.0.0.1:8765", token="...")         # doctest: +SKIP
    >>> engine.add_turns([{"role": "user", "content": "I keep bees"}], "zoe")  # doctest: +SKIP
    >>> engine.search("bees", "zoe", k=1).items[0].text                    # doctest: +SKIP
    'I keep bees'
    """

    embedder: None = None
    """Embeddings stay in the server; there is no local embedder."""
    llm: None = None

    def __init__(self, url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 path: str | Path | None = None, transport: httpx.BaseTransport | None = None) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise _errors.InvalidArgumentError("url", url, "give the server's base URL, like http://127.0.0.1:8765")
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = timeout
        self._path = Path(path).expanduser() if path is not None else _local_dir(self.url)
        self._client = httpx.Client(base_url=self.url, headers=self._headers, timeout=timeout, transport=transport)
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())
        self._closed = False
        self.max_body_bytes: int | None = None
        """The server's largest request body (from ``/v1/info``); a larger one is refused before it is sent."""
        try:
            info = self._send(_Call(None, "/v1/info"))
        except BaseException:
            self._client.close()
            raise
        self._config = EngineConfig.model_validate(info["config"])
        self.embedder_id: str | None = info.get("embedder_id")
        self.server_version: str = info.get("version", "")
        self.user_id: str | None = info.get("user_id")
        """The user the token is pinned to (None: any user)."""
        limit = info.get("max_body_bytes")
        self.max_body_bytes = limit if isinstance(limit, int) and limit > 0 else None

    def __repr__(self) -> str:
        return f"RemoteEngine({self.url!r})"

    # -- engine attributes -------------------------------------------------------------------------------------
    @property
    def config(self) -> EngineConfig:
        """The server engine's configuration."""
        return self._config

    @property
    def path(self) -> Path:
        """A local directory (created on first use, private) for state a framework face keeps beside the memory."""
        missing = [p for p in (*reversed(self._path.parents), self._path) if not p.exists()]
        for directory in missing:  # every directory this creates is private, not only the last one
            directory.mkdir(exist_ok=True, mode=0o700)
        return self._path

    # -- transport: the only I/O -------------------------------------------------------------------------------
    def _send(self, call: _Call) -> Any:
        if self._closed:
            raise _errors.ValidationError("engine", "closed", "create a new RemoteEngine(url, token)")
        content, headers = _encode(call, self.max_body_bytes)
        try:
            response = self._client.request(call.method, call.path, params=call.params, content=content,
                                            headers=headers)
        except httpx.TransportError as exc:
            raise ServerUnavailableError(f"{call.method} {self.url}{call.path}: {type(exc).__name__}: {exc}",
                                         status=0) from exc
        return _decode(call, response)

    def _aclient(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=self._timeout)
            self._aclients[loop] = client
        return client

    async def _asend(self, call: _Call) -> Any:
        if self._closed:
            raise _errors.ValidationError("engine", "closed", "create a new RemoteEngine(url, token)")
        content, headers = _encode(call, self.max_body_bytes)
        try:
            response = await self._aclient().request(call.method, call.path, params=call.params, content=content,
                                                     headers=headers)
        except httpx.TransportError as exc:
            raise ServerUnavailableError(f"{call.method} {self.url}{call.path}: {type(exc).__name__}: {exc}",
                                         status=0) from exc
        return _decode(call, response)

    def close(self) -> None:
        """Close the connections (the server and its store stay up). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        client = self._aclients.pop(loop, None) if loop is not None else None
        if client is not None:
            loop.create_task(client.aclose())  # type: ignore[union-attr]

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def health(self) -> bool:
        """True when the server's engine is ready (``/readyz``)."""
        try:
            return self._client.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    # -- requests (pure) ---------------------------------------------------------------------------------------
    @staticmethod
    def _add_turns_call(turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str,
                        wait: bool = False) -> _Call:
        fields = _ns_fields(namespace)
        if isinstance(turns, (Turn, Mapping, str, bytes)):
            raise _errors.InvalidTurnError("turns", turns, "pass a list of turns, even for a single turn")
        items = [Turn.coerce(t, i) for i, t in enumerate(turns)]  # type: ignore[arg-type]  # same errors, locally
        body: dict[str, Any] = {**fields, "turns": items}
        if wait:
            body["wait"] = True
        return _op("add_turns", body=body)

    @staticmethod
    def _search_call(query: str, namespace: Namespace | str, k: int, filters: Mapping[str, Any] | None,
                     action_state: ActionState | Mapping[str, Any] | None, explain: bool, now: TimeLike,
                     trace: bool, include_cold: bool, as_of: TimeLike, min_score: float | None) -> _Call:
        body = {**_ns_fields(namespace), "query": query, "k": k, "filters": filters, "action_state": action_state,
                "explain": explain, "now": now, "trace": trace, "include_cold": include_cold, "as_of": as_of,
                "min_score": min_score}
        return _op("search", body=body)

    @staticmethod
    def _get_turns_call(namespace: Namespace | str, limit: int | None, offset: int) -> _Call:
        params = {**_ns_params(namespace), "offset": offset}
        if limit is not None:
            params["limit"] = limit
        return _op("get_turns", params=params)

    @staticmethod
    def _forget_call(namespace: Namespace | str, record_ids: Iterable[str] | None,
                     hook_ids: Iterable[str] | None) -> _Call:
        def ids(name: str, value: Iterable[str] | None) -> list[str] | None:
            if value is None:
                return None
            if isinstance(value, str):
                raise _errors.InvalidQueryError(name, value, "pass a list of ids, even for one id")
            return list(value)
        body = {**_ns_fields(namespace), "record_ids": ids("record_ids", record_ids),
                "hook_ids": ids("hook_ids", hook_ids)}
        return _op("forget", body=body)

    @staticmethod
    def _update_call(namespace: Namespace | str, memory_id: str, content: str | None,
                     metadata: Mapping[str, Any] | None, timestamp: TimeLike) -> _Call:
        body = {**_ns_fields(namespace), "id": memory_id, "content": content,
                "metadata": None if metadata is None else dict(metadata), "timestamp": timestamp}
        return _op("update", body=body)

    @staticmethod
    def _history_call(namespace: Namespace | str, memory_id: str) -> _Call:
        return _op("history", body={**_ns_fields(namespace), "id": memory_id})

    @staticmethod
    def _list_memories_call(namespace: Namespace | str, filters: Mapping[str, Any] | None, limit: int,
                            cursor: str | None) -> _Call:
        return _op("list_memories", body={**_ns_fields(namespace), "filters": filters, "limit": limit,
                                          "cursor": cursor})

    @staticmethod
    def _get_memory_call(namespace: Namespace | str, memory_id: str) -> _Call:
        if not isinstance(memory_id, str) or not memory_id:
            raise _errors.InvalidQueryError("id", memory_id, "give the id of a memory")
        return _op("get_memory", params=_ns_params(namespace), memory_id=quote(memory_id, safe=""))

    @staticmethod
    def _export_call(namespace: Namespace | str | None) -> _Call:
        return _op("export", params=_ns_params(namespace, session=False))

    @staticmethod
    def _import_call(lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], format: str,
                     user_id: str | None, wait: bool) -> _Call:
        if format not in ("memory-ext", "mem0"):
            raise _errors.InvalidArgumentError("format", format, "give 'memory-ext' or 'mem0'")
        if format == "mem0" or isinstance(lines, Mapping):
            content = json.dumps(_jsonable(lines if isinstance(lines, Mapping) else list(lines)))
        else:
            content = "\n".join(line.rstrip("\n") if isinstance(line, str) else json.dumps(_jsonable(line))
                                 for line in lines)
        params: dict[str, Any] = {"format": format, "wait": wait,
                                  **({"user_id": user_id} if user_id is not None else {})}
        return _op("import_records", params=params, content=content.encode("utf-8"))

    @staticmethod
    def _delete_call(namespace: Namespace | str, ids: Iterable[str]) -> _Call:
        if isinstance(ids, str):
            raise _errors.InvalidQueryError("ids", ids, "pass a list of ids, even for one id")
        return _op("delete", body={**_ns_fields(namespace), "ids": list(ids)})

    @staticmethod
    def _hooks_call(namespace: Namespace | str, include_merged: bool) -> _Call:
        params = {**_ns_params(namespace, session=False), "include_merged": include_merged}
        return _op("hooks", params=params)

    @staticmethod
    def _prompt_call(namespace: Namespace | str, budget_tokens: int | None, query: str | None) -> _Call:
        body = {**_ns_fields(namespace), "budget_tokens": budget_tokens, "query": query}
        return _op("render_prompt", body=body)

    @staticmethod
    def _hook_id(hook_id: str) -> str:
        if not isinstance(hook_id, str) or not hook_id.strip():
            raise _errors.HookNotFoundError("hook_id", hook_id, "give a hook id as shown by render_prompt() or hooks()")
        return quote(hook_id.strip(), safe="")

    def _retrieve_call(self, hook_id: str, namespace: Namespace | str | None) -> _Call:
        return _op("retrieve", params=_ns_params(namespace, session=False), hook_id=self._hook_id(hook_id))

    def _importance_call(self, hook_id: str, importance: int, namespace: Namespace | str | None) -> _Call:
        body = {"importance": importance, **_ns_params(namespace, session=False)}
        return _op("set_importance", body=body, hook_id=self._hook_id(hook_id))

    @staticmethod
    def _compact_call(namespace: Namespace | str, period: str, key: str | None, now: TimeLike) -> _Call:
        body = {**_ns_fields(namespace), "period": period, "key": key, "now": now}
        return _op("compact", body=body)

    @staticmethod
    def _maybe_compact_call(namespace: Namespace | str, now: TimeLike) -> _Call:
        return _op("maybe_compact", body={**_ns_fields(namespace), "now": now})

    @staticmethod
    def _pre_compress_call(namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any],
                           estimated_tokens: int | None, task_state: Mapping[str, Any] | None,
                           now: TimeLike) -> _Call:
        body = {**_ns_fields(namespace), "full_context": full_context, "estimated_tokens": estimated_tokens,
                "task_state": dict(task_state) if isinstance(task_state, Mapping) else task_state, "now": now}
        return _op("pre_compress", body=body)

    @staticmethod
    def _put_items_call(namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]],
                        now: TimeLike) -> _Call:
        if isinstance(items, (Mapping, ItemPut, str, bytes)):
            raise _errors.InvalidQueryError("items", items, "pass a list of items, even for one item")
        body = {**_partition(namespace), "items": [i.model_dump(mode="json") if isinstance(i, ItemPut) else dict(i)
                                                   for i in items], "now": now}
        return _op("put_items", body=body)

    @staticmethod
    def _get_items_call(namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], refresh_ttl: bool,
                        now: TimeLike) -> _Call:
        body = {**_partition(namespace), "keys": _item_keys(keys), "refresh_ttl": refresh_ttl, "now": now}
        return _op("get_items", body=body)

    @staticmethod
    def _search_items_call(namespace: Namespace | str, prefix: Any, query: str | None, query_vector: Any,
                           filter: Mapping[str, Any] | None, limit: int, offset: int, refresh_ttl: bool,
                           now: TimeLike) -> _Call:
        body = {**_partition(namespace), "prefix": list(prefix), "query": query,
                "query_vector": None if query_vector is None else [float(x) for x in query_vector],
                "filter": None if filter is None else dict(filter), "limit": limit, "offset": offset,
                "refresh_ttl": refresh_ttl, "now": now}
        return _op("search_items", body=body)

    @staticmethod
    def _list_item_namespaces_call(namespace: Namespace | str, match_conditions: Iterable[MatchCondition] | None,
                                   max_depth: int | None, limit: int, offset: int, now: TimeLike) -> _Call:
        conditions = [{"match_type": kind, "path": list(path)} for kind, path in match_conditions or ()]
        body = {**_partition(namespace), "match_conditions": conditions, "max_depth": max_depth, "limit": limit,
                "offset": offset, "now": now}
        return _op("list_item_namespaces", body=body)

    @staticmethod
    def _delete_items_call(namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]],
                           now: TimeLike) -> _Call:
        body = {**_partition(namespace), "keys": _item_keys(keys), "now": now}
        return _op("delete_items", body=body)

    @staticmethod
    def _sweep_items_call(namespace: Namespace | str | None, now: TimeLike) -> _Call:
        body = {**(_partition(namespace) if namespace is not None else {}), "now": now}
        return _op("sweep_items", body=body)

    _STATS = _op("stats")
    _NAMESPACES_CALL = _op("namespaces")

    # -- the engine API (sync) ---------------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                  wait: bool = False) -> AddResult:
        """Store turns (see :meth:`MemoryEngine.add_turns`); turns are validated locally first. ``wait``: return
        once the server has them fully indexed."""
        result: AddResult = self._send(self._add_turns_call(turns, namespace, wait))
        return result

    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None, action_state: ActionState | Mapping[str, Any] | None = None,
               explain: bool = False, now: TimeLike = None, trace: bool = False, include_cold: bool = False,
               as_of: TimeLike = None, min_score: float | None = None) -> SearchResult:
        """Search (see :meth:`MemoryEngine.search`)."""
        result: SearchResult = self._send(self._search_call(query, namespace, k, filters, action_state, explain, now,
                                                            trace, include_cold, as_of, min_score))
        return result

    def get_turns(self, namespace: Namespace | str, *, limit: int | None = None, offset: int = 0) -> list[Turn]:
        """The stored turns of a namespace, oldest first."""
        listed: list[StoredTurn] = self._send(self._get_turns_call(namespace, limit, offset))
        return [_plain(t) for t in listed]

    def forget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
               hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Remove memories from every store (see :meth:`MemoryEngine.forget`)."""
        receipt: ForgetReceipt = self._send(self._forget_call(namespace, record_ids, hook_ids))
        return receipt

    def update(self, namespace: Namespace | str, id: str, *, content: str | None = None,
               metadata: Mapping[str, Any] | None = None, timestamp: TimeLike = None) -> AddResult:
        """Write a new version of a memory (see :meth:`MemoryEngine.update`)."""
        result: AddResult = self._send(self._update_call(namespace, id, content, metadata, timestamp))
        return result

    def history(self, namespace: Namespace | str, id: str) -> list[MemoryVersion]:
        """The versions of a memory (see :meth:`MemoryEngine.history`)."""
        versions: list[MemoryVersion] = self._send(self._history_call(namespace, id))
        return versions

    def list_memories(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None,
                      limit: int = 50, cursor: str | None = None) -> MemoryPage:
        """The current memories, a page at a time (see :meth:`MemoryEngine.list_memories`)."""
        page: MemoryPage = self._send(self._list_memories_call(namespace, filters, limit, cursor))
        return page

    def get_memory(self, namespace: Namespace | str, id: str) -> Memory:
        """One memory with its history (see :meth:`MemoryEngine.get_memory`)."""
        memory: Memory = self._send(self._get_memory_call(namespace, id))
        return memory

    def overview(self) -> list[NamespaceSummary]:
        """Every namespace the token reaches, with its counts (see :meth:`MemoryEngine.overview`)."""
        summaries: list[NamespaceSummary] = self._send(_op("overview"))
        return summaries

    def replaced_turns(self, namespace: Namespace | str) -> frozenset[str]:
        """Ids of the stored turns an update replaced (see :meth:`MemoryEngine.replaced_turns`)."""
        listed: list[StoredTurn] = self._send(self._get_turns_call(namespace, None, 0))
        return frozenset(t.id for t in listed if not t.current and t.id is not None)

    def export(self, namespace: Namespace | str | None = None) -> list[dict[str, Any]]:
        """The memories as export lines (see :meth:`MemoryEngine.export`; a pinned token: its user's)."""
        lines: list[dict[str, Any]] = self._send(self._export_call(namespace))
        return lines

    def import_records(self, lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], *,
                       format: Literal["memory-ext", "mem0"] = "memory-ext", user_id: str | None = None,
                       wait: bool = False, progress: bool | None = None) -> ImportReport:
        """Restore an export, or mem0's output (see :meth:`MemoryEngine.import_records`); the server's body limit
        (``server.max_body_bytes``) bounds one call. ``wait`` has the server wait for its indexer; ``progress`` is
        accepted for the engine's signature (the server shows none)."""
        report: ImportReport = self._send(self._import_call(lines, format, user_id, wait))
        return report

    def delete(self, namespace: Namespace | str, ids: Iterable[str]) -> ForgetReceipt:
        """Remove exactly these memories from every store (see :meth:`MemoryEngine.delete`)."""
        receipt: ForgetReceipt = self._send(self._delete_call(namespace, ids))
        return receipt

    def stats(self) -> StoreStats:
        """Counts and size of the server's store (needs a token that is not pinned to a user)."""
        stats: StoreStats = self._send(self._STATS)
        return stats

    def namespaces(self) -> list[Namespace]:
        """The (user_id, agent_id) partitions the token may see."""
        spaces: list[Namespace] = self._send(self._NAMESPACES_CALL)
        return spaces

    def hooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """The namespace's index hooks (see :meth:`MemoryEngine.hooks`)."""
        hooks: list[IndexHook] = self._send(self._hooks_call(namespace, include_merged))
        return hooks

    def render_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                      query: str | None = None) -> str:
        """The memory index for a system prompt (see :meth:`MemoryEngine.render_prompt`)."""
        text: str = self._send(self._prompt_call(namespace, budget_tokens, query))
        return text

    def retrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """A whole memory file (see :meth:`MemoryEngine.retrieve`)."""
        memory_file: MemoryFile = self._send(self._retrieve_call(hook_id, namespace))
        return memory_file

    def set_importance(self, hook_id: str, importance: int, namespace: Namespace | str | None = None) -> IndexHook:
        """Set a file's importance, 0-100."""
        hook: IndexHook = self._send(self._importance_call(hook_id, importance, namespace))
        return hook

    def compact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                key: str | None = None, now: TimeLike = None) -> CompactionReport:
        """Weekly merge or monthly eviction (see :meth:`MemoryEngine.compact`)."""
        report: CompactionReport = self._send(self._compact_call(namespace, period, key, now))
        return report

    def maybe_compact(self, namespace: Namespace | str, *, now: TimeLike = None) -> CompactionReport:
        """The compaction that is due."""
        report: CompactionReport = self._send(self._maybe_compact_call(namespace, now))
        return report

    def pre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                     estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                     now: TimeLike = None) -> str:
        """Save a host's whole context; returns the hook id of the saved file."""
        hook_id: str = self._send(self._pre_compress_call(namespace, full_context, estimated_tokens, task_state, now))
        return hook_id

    # -- key/value items (the LangGraph store's), shared by every client of the server ------------------------
    def put_items(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], *,
                  now: TimeLike = None) -> int:
        """Write or delete items (see :meth:`MemoryEngine.put_items`)."""
        count: int = self._send(self._put_items_call(namespace, list(items) if not isinstance(
            items, (Mapping, ItemPut, str, bytes)) else items, now))
        return count

    def get_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                  refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem | None]:
        """Items by ``(namespace, key)`` (see :meth:`MemoryEngine.get_items`)."""
        found: list[StoredItem | None] = self._send(self._get_items_call(namespace, keys, refresh_ttl, now))
        return found

    def search_items(self, namespace: Namespace | str, prefix: Sequence[str] = (), *, query: str | None = None,
                     query_vector: Sequence[float] | None = None, filter: Mapping[str, Any] | None = None,
                     limit: int = 10, offset: int = 0, refresh_ttl: bool = False,
                     now: TimeLike = None) -> list[StoredItem]:
        """Items under a prefix, filtered and ranked (see :meth:`MemoryEngine.search_items`)."""
        found: list[StoredItem] = self._send(self._search_items_call(namespace, prefix, query, query_vector, filter,
                                                                     limit, offset, refresh_ttl, now))
        return found

    def list_item_namespaces(self, namespace: Namespace | str, *,
                             match_conditions: Iterable[MatchCondition] | None = None, max_depth: int | None = None,
                             limit: int = 100, offset: int = 0, now: TimeLike = None) -> list[tuple[str, ...]]:
        """The namespaces holding items (see :meth:`MemoryEngine.list_item_namespaces`)."""
        spaces: list[tuple[str, ...]] = self._send(self._list_item_namespaces_call(namespace, match_conditions,
                                                                                   max_depth, limit, offset, now))
        return spaces

    def delete_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                     now: TimeLike = None) -> int:
        """Delete items (see :meth:`MemoryEngine.delete_items`)."""
        count: int = self._send(self._delete_items_call(namespace, keys, now))
        return count

    def sweep_items(self, namespace: Namespace | str | None = None, *, now: TimeLike = None) -> int:
        """Remove expired items of a partition (the server also sweeps on its own)."""
        count: int = self._send(self._sweep_items_call(namespace, now))
        return count

    async def aput_items(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], *,
                         now: TimeLike = None) -> int:
        """Async twin of :meth:`put_items`."""
        count: int = await self._asend(self._put_items_call(namespace, list(items), now))
        return count

    async def aget_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                         refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem | None]:
        """Async twin of :meth:`get_items`."""
        found: list[StoredItem | None] = await self._asend(self._get_items_call(namespace, keys, refresh_ttl, now))
        return found

    async def asearch_items(self, namespace: Namespace | str, prefix: Sequence[str] = (), *, query: str | None = None,
                            query_vector: Sequence[float] | None = None, filter: Mapping[str, Any] | None = None,
                            limit: int = 10, offset: int = 0, refresh_ttl: bool = False,
                     now: TimeLike = None) -> list[StoredItem]:
        """Async twin of :meth:`search_items`."""
        found: list[StoredItem] = await self._asend(self._search_items_call(
            namespace, prefix, query, query_vector, filter, limit, offset, refresh_ttl, now))
        return found

    async def alist_item_namespaces(self, namespace: Namespace | str, *,
                                    match_conditions: Iterable[MatchCondition] | None = None,
                                    max_depth: int | None = None, limit: int = 100, offset: int = 0,
                                    now: TimeLike = None) -> list[tuple[str, ...]]:
        """Async twin of :meth:`list_item_namespaces`."""
        spaces: list[tuple[str, ...]] = await self._asend(self._list_item_namespaces_call(
            namespace, match_conditions, max_depth, limit, offset, now))
        return spaces

    async def adelete_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                            now: TimeLike = None) -> int:
        """Async twin of :meth:`delete_items`."""
        count: int = await self._asend(self._delete_items_call(namespace, keys, now))
        return count

    async def asweep_items(self, namespace: Namespace | str | None = None, *, now: TimeLike = None) -> int:
        """Async twin of :meth:`sweep_items`."""
        count: int = await self._asend(self._sweep_items_call(namespace, now))
        return count

    # -- async twins (httpx.AsyncClient; never block the event loop) ---------------------------------------------
    async def aadd_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                         wait: bool = False) -> AddResult:
        """Async twin of :meth:`add_turns`."""
        result: AddResult = await self._asend(self._add_turns_call(list(turns), namespace, wait))
        return result

    async def asearch(self, query: str, namespace: Namespace | str, *, k: int = 10,
                      filters: Mapping[str, Any] | None = None,
                      action_state: ActionState | Mapping[str, Any] | None = None, explain: bool = False,
                      now: TimeLike = None, trace: bool = False, include_cold: bool = False,
                      as_of: TimeLike = None, min_score: float | None = None) -> SearchResult:
        """Async twin of :meth:`search`."""
        result: SearchResult = await self._asend(self._search_call(query, namespace, k, filters, action_state,
                                                                   explain, now, trace, include_cold, as_of,
                                                                   min_score))
        return result

    async def aget_turns(self, namespace: Namespace | str, *, limit: int | None = None,
                         offset: int = 0) -> list[Turn]:
        """Async twin of :meth:`get_turns`."""
        listed: list[StoredTurn] = await self._asend(self._get_turns_call(namespace, limit, offset))
        return [_plain(t) for t in listed]

    async def aforget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
                      hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Async twin of :meth:`forget`."""
        receipt: ForgetReceipt = await self._asend(self._forget_call(namespace, record_ids, hook_ids))
        return receipt

    async def aupdate(self, namespace: Namespace | str, id: str, *, content: str | None = None,
                      metadata: Mapping[str, Any] | None = None, timestamp: TimeLike = None) -> AddResult:
        """Async twin of :meth:`update`."""
        result: AddResult = await self._asend(self._update_call(namespace, id, content, metadata, timestamp))
        return result

    async def ahistory(self, namespace: Namespace | str, id: str) -> list[MemoryVersion]:
        """Async twin of :meth:`history`."""
        versions: list[MemoryVersion] = await self._asend(self._history_call(namespace, id))
        return versions

    async def alist_memories(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None,
                             limit: int = 50, cursor: str | None = None) -> MemoryPage:
        """Async twin of :meth:`list_memories`."""
        page: MemoryPage = await self._asend(self._list_memories_call(namespace, filters, limit, cursor))
        return page

    async def aget_memory(self, namespace: Namespace | str, id: str) -> Memory:
        """Async twin of :meth:`get_memory`."""
        memory: Memory = await self._asend(self._get_memory_call(namespace, id))
        return memory

    async def aoverview(self) -> list[NamespaceSummary]:
        """Async twin of :meth:`overview`."""
        summaries: list[NamespaceSummary] = await self._asend(_op("overview"))
        return summaries

    async def aexport(self, namespace: Namespace | str | None = None) -> list[dict[str, Any]]:
        """Async twin of :meth:`export`."""
        lines: list[dict[str, Any]] = await self._asend(self._export_call(namespace))
        return lines

    async def aimport_records(self, lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], *,
                              format: Literal["memory-ext", "mem0"] = "memory-ext", user_id: str | None = None,
                              wait: bool = False, progress: bool | None = None) -> ImportReport:
        """Async twin of :meth:`import_records`."""
        report: ImportReport = await self._asend(self._import_call(lines, format, user_id, wait))
        return report

    async def adelete(self, namespace: Namespace | str, ids: Iterable[str]) -> ForgetReceipt:
        """Async twin of :meth:`delete`."""
        receipt: ForgetReceipt = await self._asend(self._delete_call(namespace, ids))
        return receipt

    async def astats(self) -> StoreStats:
        """Async twin of :meth:`stats`."""
        stats: StoreStats = await self._asend(self._STATS)
        return stats

    async def anamespaces(self) -> list[Namespace]:
        """Async twin of :meth:`namespaces`."""
        spaces: list[Namespace] = await self._asend(self._NAMESPACES_CALL)
        return spaces

    async def ahooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """Async twin of :meth:`hooks`."""
        hooks: list[IndexHook] = await self._asend(self._hooks_call(namespace, include_merged))
        return hooks

    async def arender_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                             query: str | None = None) -> str:
        """Async twin of :meth:`render_prompt`."""
        text: str = await self._asend(self._prompt_call(namespace, budget_tokens, query))
        return text

    async def aretrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """Async twin of :meth:`retrieve`."""
        memory_file: MemoryFile = await self._asend(self._retrieve_call(hook_id, namespace))
        return memory_file

    async def aset_importance(self, hook_id: str, importance: int,
                              namespace: Namespace | str | None = None) -> IndexHook:
        """Async twin of :meth:`set_importance`."""
        hook: IndexHook = await self._asend(self._importance_call(hook_id, importance, namespace))
        return hook

    async def acompact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                       key: str | None = None, now: TimeLike = None) -> CompactionReport:
        """Async twin of :meth:`compact`."""
        report: CompactionReport = await self._asend(self._compact_call(namespace, period, key, now))
        return report

    async def amaybe_compact(self, namespace: Namespace | str, *, now: TimeLike = None) -> CompactionReport:
        """Async twin of :meth:`maybe_compact`."""
        report: CompactionReport = await self._asend(self._maybe_compact_call(namespace, now))
        return report

    async def apre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                            estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                            now: TimeLike = None) -> str:
        """Async twin of :meth:`pre_compress`."""
        hook_id: str = await self._asend(self._pre_compress_call(namespace, full_context, estimated_tokens,
                                                                 task_state, now))
        return hook_id
