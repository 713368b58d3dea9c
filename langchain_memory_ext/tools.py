"""LangChain tools for an agent's memory: search (optionally action-aware), save, and fetch a memory file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from memory_ext import ActionState, EngineLike, Namespace, SearchResult, Turn
from memory_ext.errors import HookNotFoundError
from memory_ext.store.filters import RecordFilter

from .retrievers import item_to_document

__all__ = ["ActionStateArgs", "FetchMemoryFileArgs", "SaveMemoryArgs", "SearchMemoryArgs", "create_memory_tools"]


class ActionStateArgs(BaseModel):
    """What the agent is doing now; memory-ext adds a retrieval route for it."""

    model_config = ConfigDict(extra="forbid")

    current_subgoal: str | None = Field(None, description="The step the agent is working on.")
    tentative_action: str | None = Field(None, description="The action or tool call the agent is about to take.")
    last_tool_name: str | None = Field(None, description="The tool that was just called.")
    last_tool_result: str | None = Field(None, description="What that tool returned (short).")
    failure_signal: str | None = Field(None, description="An error or failure just observed, if any.")
    missing_slots: list[str] = Field(default_factory=list, description="Information still needed.")
    known_constraints: list[str] = Field(default_factory=list, description="Constraints already known.")

    def to_action_state(self) -> ActionState:
        return ActionState(**{**self.model_dump(), "missing_slots": tuple(self.missing_slots),
                              "known_constraints": tuple(self.known_constraints)})


class SearchMemoryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="What to look for in long-term memory, as a question or statement.")
    action_state: ActionStateArgs | None = Field(
        None, description="Optional: what you are doing right now, to find memories that help with it.")


class SaveMemoryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="The fact to remember, as one self-contained sentence.")


class FetchMemoryFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hook_id: str = Field(description="The hook id of a memory file, as shown in the memory index of the system "
                                     "prompt (the full id or its first 6+ characters).")


def _render(result: SearchResult) -> tuple[str, list[Document]]:
    docs = [item_to_document(i) for i in result.items]
    return (result.context or "No relevant memories found."), docs


def create_memory_tools(engine: EngineLike, *, user_id: str, agent_id: str | None = None,
                        session_id: str | None = None, k: int = 5, speaker: str | None = None,
                        filters: Mapping[str, Any] | None = None, search_name: str = "search_memory",
                        save_name: str = "save_memory", fetch_name: str = "fetch_memory_file") -> list[BaseTool]:
    """Tools to search, save and open long-term memories of one user: ``[search, save, fetch]``.

    - ``search_memory(query, action_state=None)``: the prompt-ready context of the top ``k`` memories as the
      tool message content, the ``Document`` list as its artifact (``response_format="content_and_artifact"``).
      The model may fill ``action_state`` (subgoal, tentative action, last tool, failure, missing slots).
      ``filters`` (the engine's: ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``,
      ``metadata``) bounds every search of the tool — the items *and* the context text the model reads.
    - ``save_memory(content)``: archives the content as a turn (role ``assistant``, ``speaker``, session
      ``session_id``, ``metadata={"saved_by": "save_memory"}``) so later searches find it.
    - ``fetch_memory_file(hook_id)``: the whole memory file behind a hook of the index that
      ``engine.render_prompt(namespace)`` puts in the system prompt (as Markdown). An unknown or ambiguous id
      comes back to the model as the tool's error message (``handle_tool_error``), not as an exception.

    Both have native async implementations (the engine's worker-thread twins). For a plain retriever tool, use
    LangChain's ``create_retriever_tool(MemoryRetriever(...), name, description)``.

    >>> import tempfile
    >>> from memory_ext import MemoryEngine
    >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
    >>> search, save, fetch = create_memory_tools(engine, user_id="ana", k=1)
    >>> save.invoke({"content": "Ana is allergic to peanuts."})
    'Saved.'
    >>> "peanuts" in search.invoke({"query": "what is Ana allergic to?"})
    True
    >>> hook_id = engine.hooks("ana")[0].id
    >>> "allergic to peanuts" in fetch.invoke({"hook_id": hook_id[:8]})
    True
    >>> engine.close()
    """
    namespace = Namespace(user_id, agent_id, session_id)  # validated now, not at the first call
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        from memory_ext.errors import InvalidQueryError

        raise InvalidQueryError("k", k, "give a positive integer")

    search_filters = dict(filters) if filters is not None else None
    if search_filters is not None:  # a bad filter fails now, not at the model's first call
        RecordFilter.parse(search_filters, session_id)

    def _state(action_state: ActionStateArgs | dict[str, Any] | None) -> ActionState | None:
        if action_state is None:
            return None
        return ActionStateArgs.model_validate(action_state).to_action_state()

    def search(query: str, action_state: ActionStateArgs | None = None) -> tuple[str, list[Document]]:
        return _render(engine.search(query, namespace, k=k, filters=search_filters,
                                     action_state=_state(action_state)))

    async def asearch(query: str, action_state: ActionStateArgs | None = None) -> tuple[str, list[Document]]:
        return _render(await engine.asearch(query, namespace, k=k, filters=search_filters,
                                            action_state=_state(action_state)))

    def _turn(content: str) -> Turn:
        return Turn(role="assistant", content=content, speaker=speaker, metadata={"saved_by": save_name})

    def save(content: str) -> str:
        engine.add_turns([_turn(content)], namespace)
        return "Saved."

    async def asave(content: str) -> str:
        await engine.aadd_turns([_turn(content)], namespace)
        return "Saved."

    search_tool = StructuredTool.from_function(
        func=search, coroutine=asearch, name=search_name, args_schema=SearchMemoryArgs,
        response_format="content_and_artifact",
        description="Search long-term memory about the user (past conversations, preferences, facts). "
                    "Optionally describe what you are doing in action_state to find memories that help with it.")
    save_tool = StructuredTool.from_function(
        func=save, coroutine=asave, name=save_name, args_schema=SaveMemoryArgs,
        description="Save a fact about the user to long-term memory, as one self-contained sentence.")
    def fetch(hook_id: str) -> str:
        try:
            return engine.retrieve(hook_id, namespace).text
        except HookNotFoundError as exc:
            raise ToolException(str(exc)) from None

    async def afetch(hook_id: str) -> str:
        try:
            return (await engine.aretrieve(hook_id, namespace)).text
        except HookNotFoundError as exc:
            raise ToolException(str(exc)) from None

    fetch_tool = StructuredTool.from_function(
        func=fetch, coroutine=afetch, name=fetch_name, args_schema=FetchMemoryFileArgs, handle_tool_error=True,
        description="Open a whole memory file (every turn of a past day, week or month) by the hook id shown "
                    "in the memory index of the system prompt.")
    return [search_tool, save_tool, fetch_tool]
