"""``MemoryFunctionAgent``: a LlamaIndex ``FunctionAgent`` whose memory sees each tool call and result as it happens.

llama-index-core's ``FunctionAgent`` keeps a run's tool calls and results in its scratchpad and puts them into the
memory only when the run ends (``finalize``); the searches before the model calls in between see the user's
message alone. This agent also shows the memory each tool round (the scratchpad and the ``ToolCallResult`` s,
with the tool names and error flags) through ``memory.aobserve_step``, which
:class:`~llamaindex_memory_ext.MemoryEngineMemory` and :class:`~llamaindex_memory_ext.ArchivingMemory`
implement: the next search follows what the agent is doing (:func:`memory_ext.derive_action_state`). It works
inside an ``AgentWorkflow`` too (the workflow calls each agent's ``handle_tool_call_results``).
"""

from __future__ import annotations

from typing import Any

from ._deps import require

require("llama_index.core", "llamaindex_memory_ext.MemoryFunctionAgent")

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.agent.workflow.workflow_events import ToolCallResult  # noqa: E402
from llama_index.core.memory import BaseMemory  # noqa: E402
from llama_index.core.workflow import Context  # noqa: E402

__all__ = ["MemoryFunctionAgent"]


class MemoryFunctionAgent(FunctionAgent):
    """A ``FunctionAgent`` that shows its memory each tool call and result before the next model call.

    Use it as ``FunctionAgent`` with a memory-ext memory; any other memory works as with ``FunctionAgent``.

        >>> import asyncio, tempfile
        >>> from llama_index.core.llms import MockFunctionCallingLLM
        >>> from memory_ext import MemoryEngine
        >>> from llamaindex_memory_ext import MemoryEngineMemory, MemoryFunctionAgent
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> def book_hotel(city: str, check_in: str) -> str:
        ...     '''Book a hotel room; check_in is the arrival date.'''
        ...     return "booked"
        >>> agent = MemoryFunctionAgent(llm=MockFunctionCallingLLM(), tools=[book_hotel])  # calls it with no args
        >>> memory = MemoryEngineMemory(engine=engine, user_id="ana", session_id="trip-1")
        >>> async def main():
        ...     return await agent.run("Book me a hotel in Lisbon", memory=memory)
        >>> _ = asyncio.run(main())
        >>> [(t.role.value, t.tool_name, t.is_error) for t in engine.get_turns("ana")]
        [('user', None, False), ('assistant', None, False), ('tool', 'book_hotel', True), ('assistant', None, False)]
        >>> engine.close()
    """

    async def handle_tool_call_results(self, ctx: Context, results: list[ToolCallResult],
                                       memory: BaseMemory) -> None:
        """``FunctionAgent``'s, then the memory is shown the scratchpad and the results (``aobserve_step``)."""
        await super().handle_tool_call_results(ctx, results, memory)
        observe: Any = getattr(memory, "aobserve_step", None)
        if observe is not None:
            scratchpad = await ctx.store.get(self.scratchpad_key, default=[])
            await observe(list(scratchpad), list(results), tools=list(self.tools or ()))
