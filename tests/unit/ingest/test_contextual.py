"""Windows and turns encoded in runs of consecutive turns (``ingest.window_vectors: context``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from memory_ext import Turn
from memory_ext.embed import HashingEmbedder, SegmentEmbedder
from memory_ext.ingest.contextual import encode_in_context, plan_runs, sentence_pieces

CHAT = [
    ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "Wow, that's awesome! What happened there?"),
    ("Caroline", "The transgender stories were inspiring, I felt accepted."),
    ("Melanie", "I painted a sunset over the lake last week, it calms me down."),
    ("Caroline", "You should show it at the art fair in June!"),
    ("Melanie", "Maybe, my kids loved the pottery class we took too."),
    ("Caroline", "I'm researching adoption agencies, I want to be a mom."),
    ("Melanie", "That's a big step, I'm proud of you."),
    ("Caroline", "Thanks! I also started counseling courses in psychology."),
    ("Melanie", "We went camping at the beach and roasted marshmallows."),
]


@dataclass
class _States:
    hidden: np.ndarray
    spans: list[tuple[int, int]]

    def mean(self, segments: Sequence[int] | None = None) -> np.ndarray:
        return self.hidden.mean(axis=0) if segments is None else self.states(segments).mean(axis=0)

    def states(self, segments: Sequence[int]) -> np.ndarray:
        return np.concatenate([self.hidden[a:b] for a, b in (self.spans[i] for i in segments)])


class WordStatesEmbedder(HashingEmbedder):
    """A context-free token encoder: every word's state is its hashed vector. Pooling a turn's words inside a
    run is then exactly pooling them alone, so what the indexer computes can be checked to the last digit."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.id = "word-states:64"
        self.encode_calls: list[int] = []
        self.sparse_texts: list[str] = []

    def _word(self, w: str) -> np.ndarray:
        return self._embed(w) + 0.01

    def encode(self, docs: Sequence[Sequence[str]], *, query: bool = False) -> list[_States]:
        self.encode_calls.append(len(docs))
        out = []
        for segments in docs:
            rows = [self._word("query:" if query else "passage:")]
            spans = []
            for seg in segments:
                words = re.findall(r"\S+", seg)
                spans.append((len(rows), len(rows) + len(words)))
                rows += [self._word(w.lower()) for w in words]
            out.append(_States(np.stack(rows).astype(np.float32), spans))
        return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        vecs = np.stack([e.mean() for e in self.encode([[t] for t in texts])])
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        self.sparse_texts += list(texts)
        out = []
        for t in texts:
            pooled = np.maximum(np.stack([self._word(w.lower()) for w in t.split()]).max(axis=0), 0)
            idx = np.argsort(-pooled)[:8].astype(np.int32)
            out.append((idx, pooled[idx].astype(np.float32)))
        return out


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_the_fake_is_a_segment_embedder() -> None:
    assert isinstance(WordStatesEmbedder(), SegmentEmbedder)
    assert not isinstance(HashingEmbedder(), SegmentEmbedder)


def test_runs_keep_every_window_whole_and_restart_two_turns_back() -> None:
    windows = [[i - 1, i, i + 1] for i in range(1, 20)] + [[0, 1]]
    runs = plan_runs(windows, max_turns=8)
    for members in windows:
        assert any(set(members) <= set(run) for run in runs)
    assert all(len(run) <= 8 for run in runs)
    assert [run[:2] for run in runs[1:]] == [runs[i][-2:] for i in range(len(runs) - 1)]
    encoded = sum(len(r) for r in runs)
    assert encoded <= 1.4 * 21  # each turn about once, not three times
    # separate conversations (a gap: no shared members) never share a run
    assert plan_runs([[1, 2, 3], [2, 3], [7, 8], [7, 8, 9]], 8) == [[1, 2, 3], [7, 8, 9]]


@pytest.mark.parametrize("max_turns", [3, 8])
def test_window_and_turn_vectors_pool_their_own_words(max_turns: int) -> None:
    emb = WordStatesEmbedder()
    turns = {i + 1: (f"{s}: {t}", t) for i, (s, t) in enumerate(CHAT)}
    windows = {100 + c: [c - 1, c, c + 1] for c in range(2, 10)}
    res = encode_in_context(emb, windows=windows, turns=turns, want_dense=set(turns), want_sparse=set(turns),
                            sparse_fn=emb.embed_sparse, max_turns=max_turns)
    # a pass per window (3) or a few runs (8), and turns 1 and 10 read from their windows too
    assert sum(emb.encode_calls) == (len(windows) if max_turns == 3 else 2)
    for w, members in windows.items():
        words = [emb._word(x.lower()) for m in members for x in turns[m][0].split()]
        if max_turns == 3:  # exactly the window text's vector: the prefix is pooled too
            words.append(emb._word("passage:"))
        assert np.allclose(res.dense[w], _unit(np.mean(words, axis=0)), atol=1e-6)
    for rid, (index_text, text) in turns.items():
        words = [emb._word(x.lower()) for x in index_text.split()]
        assert np.allclose(res.dense[rid], _unit(np.mean(words, axis=0)), atol=1e-6)
        assert np.array_equal(res.sparse[rid][0], emb.embed_sparse([text])[0][0])  # raw text, no speaker
    assert sorted(emb.sparse_texts[:len(turns)]) == sorted(t for _, t in turns.values())


def test_turns_outside_every_window_are_encoded_alone() -> None:
    emb = WordStatesEmbedder()
    turns = {1: ("Caroline: hi there", "hi there"), 2: ("Melanie: hello", "hello"), 3: ("Caroline: bye", "bye")}
    res = encode_in_context(emb, windows={10: [1, 2]}, turns=turns, want_dense={1, 2, 3}, want_sparse={3},
                            sparse_fn=emb.embed_sparse)
    assert set(res.dense) == {10, 1, 2, 3} and set(res.sparse) == {3}
    assert np.allclose(res.dense[3], emb.embed_documents([turns[3][0]])[0], atol=1e-6)
    assert np.allclose(res.dense[10], emb.embed_documents(["Caroline: hi there Melanie: hello"])[0], atol=1e-6)


def test_the_work_is_shared_between_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    emb = WordStatesEmbedder()
    turns = {i + 1: (f"{s}: {t}", t) for i, (s, t) in enumerate(CHAT)}
    windows = {100 + c: [c - 1, c, c + 1] for c in range(2, 10)}
    alone = encode_in_context(emb, windows=windows, turns=turns, want_dense=set(turns), want_sparse=set(turns),
                              sparse_fn=emb.embed_sparse)
    with ThreadPoolExecutor(2) as pool:
        shared = encode_in_context(emb, windows=windows, turns=turns, want_dense=set(turns),
                                   want_sparse=set(turns), sparse_fn=emb.embed_sparse, map_fn=pool.map)
    assert alone.dense.keys() == shared.dense.keys() and alone.sparse.keys() == shared.sparse.keys()
    for rid in alone.dense:
        assert np.allclose(alone.dense[rid], shared.dense[rid])


@pytest.mark.parametrize("mode", ["embed", "context"])
@pytest.mark.parametrize("batch", [3, 64])
def test_engine_indexes_turns_with_their_windows(store_target, batch: int, mode: str) -> None:
    """Each batch takes the queued windows of its turns along (a write queues every turn before the windows), so
    a turn and its window come out of one pass, on SQLite and on PostgreSQL alike."""
    emb = WordStatesEmbedder()
    # sentence passes off: this counts the window passes (the sentence-mixed vectors have their own test below)
    cfg = {"ingest": {"window_vectors": mode, "indexer_batch": batch, "sentence_vectors": 0.0}}
    with store_target.open(cfg, embedder=emb) as engine:
        for i in range(0, len(CHAT), 4):  # several writes: windows span them
            engine.add_turns([Turn(role="user", speaker=s, content=t, session_id="s1") for s, t in CHAT[i:i + 4]],
                             namespace="u1", wait=True)
        res = engine.search("who painted a sunset over the lake?", namespace="u1", k=3)
        assert res.pending == 0
        assert any("sunset" in item.text for item in res.items)
        store = engine._store
        assert store.pending() == 0
        # a pass per window (embed) or per run (context), plus the newest turn of each write (its window waits
        # for its successor); never a pass per window *and* one per turn (19 texts here)
        assert sum(emb.encode_calls) < 2 * len(CHAT) - 2
        rows = store.reader().execute("SELECT r.kind, r.rid, r.index_text FROM records r").fetchall()
        vectors = store.stored_vectors(store.reader(), [r[1] for r in rows])
    kinds: dict[str, int] = {}
    for kind, rid, _ in rows:
        assert rid in vectors, kind  # nothing left without a vector
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds["turn"] == len(CHAT)
    assert kinds["window"] == len(CHAT) - 1  # the newest turn waits for its successor
    if mode == "embed":  # a window's vector is the embedder's vector of the window's text
        for kind, rid, text in rows:
            if kind == "window":
                words = [emb._word(x.lower()) for x in [*text.split()]]
                expected = _unit(np.mean([emb._word("passage:"), *words], axis=0))
                assert np.allclose(vectors[rid], expected, atol=1e-5)


def test_sentence_pieces_keep_the_speaker_and_split_a_trailing_note() -> None:
    assert sentence_pieces("Maya: I moved to Lisbon. I love it! [image: a tram]",
                           "I moved to Lisbon. I love it! [image: a tram]") == \
        ["Maya: I moved to Lisbon.", "Maya: I love it!", "Maya: [image: a tram]"]
    assert sentence_pieces("杰克: 我很难过。今天下雨了！", "我很难过。今天下雨了！") == \
        ["杰克: 我很难过。", "杰克: 今天下雨了！"]
    assert sentence_pieces("Maya: hi there", "hi there") == ["Maya: hi there"]  # one sentence: the turn's text
    assert sentence_pieces("[image: a tram]", "[image: a tram]") == ["[image: a tram]"]  # a note alone stays whole
    assert sentence_pieces("Maya: ", "") == []


@pytest.mark.parametrize("max_turns", [3, 8])
def test_sentence_vectors_mix_each_turns_sentences_into_its_vector(max_turns: int) -> None:
    """With a weight, a turn's vector is ``unit(turn + weight * mean(sentence vectors))``; windows keep theirs,
    and the sentences are encoded in the two jobs (not after them), with the same result either way."""
    from concurrent.futures import ThreadPoolExecutor

    chat = [(s, f"{t} {CHAT[(i + 3) % len(CHAT)][1]}") for i, (s, t) in enumerate(CHAT)]  # two sentences each
    turns = {i + 1: (f"{s}: {t}", t) for i, (s, t) in enumerate(chat)}
    windows = {100 + c: [c - 1, c, c + 1] for c in range(2, 10)}
    plain = encode_in_context(WordStatesEmbedder(), windows=windows, turns=turns, want_dense=set(turns),
                              want_sparse=set(), max_turns=max_turns)
    emb = WordStatesEmbedder()
    with ThreadPoolExecutor(2) as pool:
        mixed = encode_in_context(emb, windows=windows, turns=turns, want_dense=set(turns), want_sparse=set(),
                                  max_turns=max_turns, sentence_weight=2.0, map_fn=pool.map)
    for w in windows:
        assert np.allclose(mixed.dense[w], plain.dense[w], atol=1e-6)
    for rid, (index_text, text) in turns.items():
        pieces = sentence_pieces(index_text, text)
        assert len(pieces) >= 2 and all(p.startswith(index_text.split(":")[0] + ": ") for p in pieces)
        expected = _unit(plain.dense[rid] + 2.0 * np.mean(WordStatesEmbedder().embed_documents(pieces), axis=0))
        assert np.allclose(mixed.dense[rid], expected, atol=1e-6)
        assert not np.allclose(mixed.dense[rid], plain.dense[rid], atol=1e-3)
    # every sentence once, in the jobs' passes
    runs = len(windows) if max_turns == 3 else len(plan_runs(list(windows.values()), max_turns))
    assert sum(emb.encode_calls) == runs + sum(len(sentence_pieces(*t)) for t in turns.values())


def test_engine_stores_sentence_mixed_turn_vectors(store_target) -> None:
    """``ingest.sentence_vectors`` reaches the indexer: on SQLite and PostgreSQL alike, a stored turn vector is
    its pooled tokens mixed with its sentences' vectors (the fake pools words without context)."""
    emb = WordStatesEmbedder()
    weight = 1.5
    with store_target.open({"ingest": {"sentence_vectors": weight}}, embedder=emb) as engine:
        engine.add_turns([Turn(role="user", speaker=s, content=f"{t} Bye for now.", session_id="s1")
                          for s, t in CHAT[:5]], namespace="u1", wait=True)
        store = engine._store
        rows = store.reader().execute("SELECT r.rid, r.index_text, r.text FROM records r WHERE r.kind = 'turn'"
                                      ).fetchall()
        vectors = store.stored_vectors(store.reader(), [r[0] for r in rows])
    assert len(rows) == 5
    for rid, index_text, text in rows:
        pooled = _unit(np.mean([emb._word(x.lower()) for x in index_text.split()], axis=0))  # in its run
        pieces = sentence_pieces(index_text, text)
        assert pieces[-1].endswith(": Bye for now.")
        expected = _unit(pooled + weight * np.mean(emb.embed_documents(pieces), axis=0))
        assert np.allclose(vectors[rid], expected, atol=1e-5)
