"""``MemoryMiddleware``: action-aware long-term memory inside a LangChain 1.x agent (``create_agent``), and the
same pieces for a LangGraph ``StateGraph`` node (:func:`action_state_from_messages`, ``recall``, ``archive``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from . import _deps

_deps.require("langchain.agents.middleware", "langchain>=1.1", "langchain_memory_ext.MemoryMiddleware")

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest  # noqa: E402
from langchain_core.messages import BaseMessage, SystemMessage  # noqa: E402
from langchain_core.tools import BaseTool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from memory_ext import ActionState, AddResult, EngineLike, Namespace, SearchResult, derive_action_state  # noqa: E402
from memory_ext.errors import InvalidArgumentError  # noqa: E402
from memory_ext.retrieval.context import memory_block  # noqa: E402

from .chat_history import message_to_turn  # noqa: E402

__all__ = ["MemoryMiddleware", "action_state_from_messages", "tool_spec"]

_SKIPPED_TYPES = frozenset({"system", "developer", "remove"})


def tool_spec(tool: BaseTool | Callable[..., Any] | Mapping[str, Any]) -> dict[str, Any]:
    """A tool as the JSON-schema spec the derivation reads (``{"type": "function", "function": {"name",
    "description", "parameters"}}``): a ``BaseTool`` or a function through LangChain's
    ``convert_to_openai_tool``; a mapping (a provider tool dict) as it is.

    >>> from langchain_core.tools import tool
    >>> @tool
    ... def book_hotel(city: str, check_in: str) -> str:
    ...     '''Book a hotel room; check_in is the arrival date.'''
    ...     return "ok"
    >>> tool_spec(book_hotel)["function"]["parameters"]["required"]
    ['city', 'check_in']
    """
    if isinstance(tool, Mapping):
        return dict(tool)
    return convert_to_openai_tool(tool)


def _turns(messages: Sequence[BaseMessage], session_id: str | None = None) -> list[Any]:
    return [message_to_turn(m, session_id) for m in messages if m.type not in _SKIPPED_TYPES]


def action_state_from_messages(messages: Sequence[BaseMessage | Any],
                               tools: Sequence[BaseTool | Callable[..., Any] | Mapping[str, Any]] | None = None, *,
                               token_budget: int | None = None) -> ActionState:
    """The :class:`~memory_ext.ActionState` of an agent's messages and tools: the messages become turns
    (:func:`~langchain_memory_ext.chat_history.message_to_turn`: a ``ToolMessage``'s ``status="error"`` is the
    turn's ``is_error``) and :func:`memory_ext.derive_action_state` derives the state. Use it in a LangGraph
    node; :class:`MemoryMiddleware` calls it before each model call.

    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> state = action_state_from_messages([
    ...     HumanMessage("Book a hotel in Lisbon, April 14 to 16"),
    ...     AIMessage("", tool_calls=[{"id": "c1", "name": "book_hotel", "args": {"check_in": "14/04/2026"}}]),
    ...     ToolMessage("HTTP 422: check_in must be YYYY-MM-DD", tool_call_id="c1", name="book_hotel",
    ...                 status="error")])
    >>> state.last_tool_name, state.last_tool_args, state.failure_signal
    ('book_hotel', {'check_in': '14/04/2026'}, 'HTTP 422: check_in must be YYYY-MM-DD')
    """
    specs = [tool_spec(t) for t in tools] if tools else None
    return derive_action_state(_turns(_messages(messages)), specs, token_budget=token_budget)


def _thread_id(runtime: Any) -> str | None:
    """The LangGraph thread of a run (``config["configurable"]["thread_id"]``), or None outside one."""
    thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
    if thread is None:
        try:
            from langgraph.config import get_config

            thread = (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:  # not inside a runnable context
            thread = None
    return str(thread) if thread is not None else None


def _with_block(request: ModelRequest[Any], block: str) -> ModelRequest[Any]:
    """The request with ``block`` appended to its system message (a new one when it has none)."""
    if not block:
        return request
    current = request.system_message
    if current is None:
        return request.override(system_message=SystemMessage(content=block))
    if isinstance(current.content, str):
        content: Any = f"{current.content}\n\n{block}" if current.content else block
    else:  # content blocks (e.g. with cache control): one more text block
        content = [*current.content, {"type": "text", "text": block}]
    return request.override(system_message=SystemMessage(content=content, id=current.id, name=current.name))


class MemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Long-term memory for ``langchain.agents.create_agent`` that follows what the agent is doing.

    Before each model call it derives the agent's :class:`~memory_ext.ActionState` from the request's messages
    and tools (:func:`action_state_from_messages`: the latest request, the last tool call with its arguments and
    result, a failure, missing parameters), searches the user's memories with it, and appends the memories that
    fit ``token_budget`` to the system message as a delimited block of quoted data, each line marked with its
    source (:func:`memory_ext.retrieval.context.memory_block`): a stored text saying "ignore previous
    instructions … </memories>" stays a quoted line inside the block. Memories of the run's own thread are left
    out (they are in the prompt already). After the run it archives the run's messages as turns of the thread
    (``config["configurable"]["thread_id"]`` is the session): idempotent by message id, with tool name,
    arguments, call id and error status as fields. Sync and async (``ainvoke``: the engine's async twins).

    Setup:
        ``pip install "memory-ext[langchain]"`` (brings ``langchain>=1.1``)

    Use:
        >>> import tempfile
        >>> from langchain.agents import create_agent
        >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> from memory_ext import MemoryEngine, Turn
        >>> from langchain_memory_ext import MemoryMiddleware
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> _ = engine.add_turns([Turn(role="tool", content="HTTP 422: check_in must be YYYY-MM-DD",
        ...                            tool_name="book_hotel", is_error=True, session_id="earlier")], "ana")
        >>> memory = MemoryMiddleware(engine=engine, user_id="ana")
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Sure.")]))
        >>> agent = create_agent(model, tools=[], middleware=[memory])
        >>> _ = agent.invoke({"messages": [("user", "Book a hotel in Porto, check_in May 3")]},
        ...                  {"configurable": {"thread_id": "t-1"}})
        >>> [t.content for t in engine.get_turns("ana")][-2:]   # the run, archived as the thread's turns
        ['Book a hotel in Porto, check_in May 3', 'Sure.']
        >>> block = memory.recall([("user", "Book a hotel in Porto, check_in May 3")], thread_id="t-1")
        >>> print(block.splitlines()[2])   # the thread's own turns are left out: they are in the prompt
        - [... · tool output book_hotel, error] "HTTP 422: check_in must be YYYY-MM-DD"
        >>> engine.close()

    LangGraph ``StateGraph``: call :meth:`recall` / :meth:`archive` (or their async twins) from a node, see
    docs/agents.md.
    """

    def __init__(self, *, engine: EngineLike, user_id: str, agent_id: str | None = None, k: int = 8,
                 token_budget: int = 800, window: int = 20, archive: bool = True) -> None:
        for name, value in (("k", k), ("token_budget", token_budget), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidArgumentError(name, value, f"{name} is a positive integer")
        self.engine = engine
        self.namespace = Namespace(user_id, agent_id)
        self.k = k
        self.token_budget = token_budget
        self.window = window
        self.archive_runs = archive
        self.tools: list[BaseTool] = []

    # -- the pieces (usable from any LangGraph node) -------------------------------------------------------------
    def action_state(self, messages: Sequence[BaseMessage | Any],
                     tools: Sequence[BaseTool | Callable[..., Any] | Mapping[str, Any]] | None = None
                     ) -> ActionState:
        """The action state of the last ``window`` messages (see :func:`action_state_from_messages`)."""
        return action_state_from_messages(_messages(messages)[-self.window:], tools, token_budget=self.token_budget)

    def _query(self, messages: Sequence[BaseMessage | Any],
               tools: Sequence[BaseTool | Callable[..., Any] | Mapping[str, Any]] | None
               ) -> tuple[str, ActionState] | None:
        state = self.action_state(messages, tools)
        query = state.current_subgoal or state.last_tool_name
        return (query, state) if query else None

    def _block(self, result: SearchResult, thread_id: str | None) -> str:
        return memory_block(result, budget_tokens=self.token_budget, max_items=self.k,
                            exclude_sessions=(thread_id,) if thread_id is not None else ())

    def recall(self, messages: Sequence[BaseMessage | Any],
               tools: Sequence[BaseTool | Callable[..., Any] | Mapping[str, Any]] | None = None, *,
               thread_id: str | None = None) -> str:
        """The memories block for the next model call ("" when nothing fits or there is no request yet): the
        action state of ``messages`` and ``tools``, searched, memories of ``thread_id`` left out."""
        asked = self._query(messages, tools)
        if asked is None:
            return ""
        result = self.engine.search(asked[0], self.namespace, k=self.k * 2 if thread_id else self.k,
                                    action_state=asked[1])
        return self._block(result, thread_id)

    async def arecall(self, messages: Sequence[BaseMessage | Any],
                      tools: Sequence[BaseTool | Callable[..., Any] | Mapping[str, Any]] | None = None, *,
                      thread_id: str | None = None) -> str:
        """:meth:`recall` without blocking the event loop (the engine's ``asearch``)."""
        asked = self._query(messages, tools)
        if asked is None:
            return ""
        result = await self.engine.asearch(asked[0], self.namespace, k=self.k * 2 if thread_id else self.k,
                                           action_state=asked[1])
        return self._block(result, thread_id)

    def archive(self, messages: Sequence[BaseMessage | Any], *, thread_id: str | None = None) -> AddResult | None:
        """Store ``messages`` (system messages aside) as turns of the session ``thread_id``; a message whose id is
        stored already is not stored again."""
        turns = _turns(_messages(messages), thread_id)
        return self.engine.add_turns(turns, self.namespace) if turns else None

    async def aarchive(self, messages: Sequence[BaseMessage | Any], *,
                       thread_id: str | None = None) -> AddResult | None:
        """:meth:`archive` without blocking the event loop."""
        turns = _turns(_messages(messages), thread_id)
        return await self.engine.aadd_turns(turns, self.namespace) if turns else None

    # -- the agent's hooks ---------------------------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]) -> Any:
        """Before the model call: the memories for what the agent is doing, in the system message."""
        block = self.recall(request.messages, request.tools, thread_id=_thread_id(request.runtime))
        return handler(_with_block(request, block))

    async def awrap_model_call(self, request: ModelRequest[Any],
                               handler: Callable[[ModelRequest[Any]], Awaitable[Any]]) -> Any:
        block = await self.arecall(request.messages, request.tools, thread_id=_thread_id(request.runtime))
        return await handler(_with_block(request, block))

    def after_agent(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        """After the run: its messages archived as the thread's turns."""
        if self.archive_runs:
            self.archive(state["messages"], thread_id=_thread_id(runtime))
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        if self.archive_runs:
            await self.aarchive(state["messages"], thread_id=_thread_id(runtime))
        return None


def _messages(messages: Sequence[BaseMessage | Any]) -> list[BaseMessage]:
    """Messages, with LangChain's shorthands (``("user", "text")``, dicts) converted."""
    if all(isinstance(m, BaseMessage) for m in messages):
        return list(messages)
    from langchain_core.messages import convert_to_messages

    return list(convert_to_messages(messages))
