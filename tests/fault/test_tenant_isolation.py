"""Tenant isolation as a property (issue 14, fault suite): random interleavings of every write and read operation
across 5 users x 2 agents, through the engine and through every face (LangChain retriever, chat history and
LangGraph store; LlamaIndex retriever and memory). Every text carries its tenant's tag; a read may only ever see
its own tenant's tags. Seeded (``derandomize=True``) so CI runs the same interleavings every time; raise
``MEMORY_EXT_FAULT_EXAMPLES`` for more.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")  # in the `test` extra
pytest.importorskip("langgraph")
pytest.importorskip("llama_index.core")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage

from langchain_memory_ext import MemoryChatMessageHistory, MemoryRetriever, MemoryStore
from llamaindex_memory_ext import MemoryEngineMemory
from llamaindex_memory_ext import MemoryRetriever as LlamaRetriever
from memory_ext import MemoryEngine, Namespace

USERS = [f"u{i}" for i in range(5)]
AGENTS = [None, "bot"]
TENANTS = [(u, a) for u in USERS for a in AGENTS]
EXAMPLES = int(os.environ.get("MEMORY_EXT_FAULT_EXAMPLES", "25"))
TAG = re.compile(r"tenant([a-z0-9]+)x([a-z0-9]+)q")
WORDS = ["porto", "beagle", "train", "lyon", "sister", "passport", "garden", "piano"]
RUNS = {"interleavings": 0, "operations": 0}


def tag(tenant: tuple[str, str | None]) -> str:
    return f"tenant{tenant[0]}x{tenant[1] or 'none'}q"


def tags_in(text: str) -> set[tuple[str, str | None]]:
    return {(u, None if a == "none" else a) for u, a in TAG.findall(text)}


OPS = st.sampled_from(["add", "chat", "lg_put", "li_put", "search", "retriever", "li_retriever", "chat_read",
                       "lg_search", "li_get", "forget_session", "forget_record", "compact", "prompt", "lg_delete"])
STEP = st.tuples(OPS, st.sampled_from(range(len(TENANTS))), st.sampled_from(WORDS), st.integers(0, 2))


class World:
    def __init__(self, path: Path) -> None:
        self.engine = MemoryEngine.open(path, embedder="hashing")
        self.stores = {t: MemoryStore(engine=self.engine, user_id=t[0], agent_id=t[1]) for t in TENANTS}
        self.counter = 0

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.engine.close()

    def text(self, tenant: tuple[str, str | None], word: str) -> str:
        self.counter += 1
        return f"{tag(tenant)} note {self.counter} about the {word}"

    def step(self, op: str, tenant: tuple[str, str | None], word: str, session: int) -> list[str]:
        """Run one operation; return every text it read (to check for foreign tags)."""
        user, agent = tenant
        ns = Namespace(user, agent)
        sid = f"s{session}"
        e = self.engine
        if op == "add":
            e.add_turns([{"role": "user", "content": self.text(tenant, word), "session_id": sid}], ns)
        elif op == "chat":
            MemoryChatMessageHistory(engine=e, user_id=user, agent_id=agent, session_id=sid).add_messages(
                [HumanMessage(self.text(tenant, word)), AIMessage(self.text(tenant, word))])
        elif op == "lg_put":
            self.stores[tenant].put(("mem", sid), f"k{session}", {"text": self.text(tenant, word)})
        elif op == "li_put":
            MemoryEngineMemory(engine=e, user_id=user, agent_id=agent, session_id=sid).put(
                ChatMessage(role="user", content=self.text(tenant, word)))
        elif op == "search":
            return [i.text for i in e.search(f"the {word}", ns, k=20).items] + [e.search(word, ns).context]
        elif op == "retriever":
            return [d.page_content for d in MemoryRetriever(engine=e, user_id=user, agent_id=agent, k=20)
                    .invoke(f"about the {word}")]
        elif op == "li_retriever":
            return [n.node.get_content() for n in LlamaRetriever(e, user, agent_id=agent, similarity_top_k=20)
                    .retrieve(f"about the {word}")]
        elif op == "chat_read":
            return [str(m.content) for m in
                    MemoryChatMessageHistory(engine=e, user_id=user, agent_id=agent, session_id=sid).messages]
        elif op == "lg_search":
            found = self.stores[tenant].search(("mem",), query=f"the {word}", limit=20)
            return [str(i.value) for i in found] + [str(i.value) for i in self.stores[tenant].search(("mem",))]
        elif op == "li_get":
            return [str(m.content) for m in MemoryEngineMemory(engine=e, user_id=user, agent_id=agent,
                                                               session_id=sid).get(f"the {word}")]
        elif op == "forget_session":
            e.forget(Namespace(user, agent, session_id=sid))
        elif op == "forget_record":
            items = e.search(f"the {word}", ns, k=1).items
            if items:
                e.forget(ns, record_ids=[items[0].id])
        elif op == "compact":
            e.maybe_compact(ns)
        elif op == "prompt":
            return [e.render_prompt(ns, budget_tokens=2000)] + [h.title + h.abstract for h in e.hooks(ns)]
        elif op == "lg_delete":
            self.stores[tenant].delete(("mem", sid), f"k{session}")
        return []


@pytest.mark.fault
@pytest.mark.timeout(1800)
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=5, max_size=30))
def test_no_tenant_ever_sees_another_tenants_memories(tmp_path_factory: pytest.TempPathFactory,
                                                       steps: list[tuple[str, int, str, int]]) -> None:
    world = World(tmp_path_factory.mktemp("tenants"))
    try:
        for op, t, word, session in steps:
            tenant = TENANTS[t]
            for text in world.step(op, tenant, word, session):
                foreign = tags_in(text) - {tenant}
                assert not foreign, f"{op} for {tenant} returned {sorted(foreign)}: {text[:200]!r}"
            RUNS["operations"] += 1
        RUNS["interleavings"] += 1
    finally:
        world.close()


@pytest.mark.fault
def test_the_property_ran_enough_interleavings() -> None:
    if RUNS["interleavings"] == 0:
        pytest.skip("run together with the property test")
    print(f"tenant isolation: {RUNS['interleavings']} interleavings, {RUNS['operations']} operations")
    assert RUNS["interleavings"] >= min(EXAMPLES, 10) and len(TENANTS) >= 10


def test_tags_are_recognised() -> None:
    assert tags_in(f"a {tag(('u1', None))} b {tag(('u2', 'bot'))}") == {("u1", None), ("u2", "bot")}
    assert tags_in("no tag") == set()
