"""The procedure lift: between two calls, the tool pages that take what the next-step route asks for go first, in
the fusion's order, whatever the embedder's score scale; the other tool pages gain a share of the spread."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memory_ext import EvidenceRoute, SearchPlan
from memory_ext.models import RecordKind, RouteGoal
from memory_ext.plan.procedures import NEXT_STEP_ROUTE
from memory_ext.retrieval.fuse import Fused
from memory_ext.retrieval.procedures import lift_procedures
from memory_ext.store.catalog import Catalog

TEXTS = {1: "Customers often ask how cash back is computed on purchases.",
         2: "Cash back FAQ: rewards post after the statement closes.",
         3: "Use get_card_details(card_id) to read a card's limits.",
         4: "Call submit_dispute(user_id, transaction_id) to dispute a posted cash back amount.",
         5: "Call reset_pin(card_id) after verifying the customer."}


def catalog() -> Catalog:
    cat = Catalog(generation=(0, 0))
    cat._append([(i, "turn", None, "s1", None, 100.0 * i, "user", False, None) for i in range(1, 6)])
    cat._append([(10 + i, "procedure", i, "s1", None, 100.0 * i, "user", False, None) for i in (3, 4, 5)])
    return cat


def plan(asked: str) -> SearchPlan:
    return SearchPlan(routes=(EvidenceRoute(goal=RouteGoal.QUERY, queries=("my cash back is wrong",)),
                              EvidenceRoute(goal=RouteGoal.OTHER, name=NEXT_STEP_ROUTE, queries=(asked,),
                                            boost_kinds=(RecordKind.PROCEDURE,))))


def text_of(positions: Sequence[int]) -> dict[int, str]:
    return {p: TEXTS[p + 1] for p in positions if p + 1 in TEXTS}


def pool(scores: list[float], rids: tuple[int, ...] = (1, 2, 3, 4, 5)) -> Fused:
    total = np.full(8, -np.inf)
    total[np.asarray(rids) - 1] = scores
    return Fused(total=total, rids=list(rids), scores=scores)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e3])
def test_the_pages_taking_what_the_route_asks_for_go_first_in_fusion_order(scale: float) -> None:
    cat = catalog()
    fused = pool([scale * s for s in (9.0, 8.0, 2.0, 1.5, 1.0)])
    out = lift_procedures(fused, cat, plan("card_id"), None, text_of)
    assert out.rids == [3, 5, 4, 1, 2]  # both take a card_id, in the fusion's order; then the lift's order
    assert out.scores == fused.scores  # the pool keeps its scores: the turns trade places
    assert out.total[cat.pos_of(np.asarray([5]))[0]] == out.scores[1]


def test_a_tool_page_the_lift_alone_puts_first_stays_first() -> None:
    fused = pool([9.0, 8.0, 7.0, 2.0, 1.0], rids=(1, 3, 2, 5, 4))  # the lift: 3, 5, 1, 4, 2
    assert lift_procedures(fused, catalog(), plan("user_id"), None, text_of).rids == [3, 4, 5, 1, 2]


def test_without_a_match_or_texts_the_tool_pages_gain_the_spread() -> None:
    cat = catalog()
    fused = pool([9.0, 8.0, 7.0, 2.0, 1.0])
    for out in (lift_procedures(fused, cat, plan("account_id"), None, text_of),
                lift_procedures(fused, cat, plan("user_id"), None, None)):
        # the spread (9 - 1): the tool pages 3, 4 and 5 (15, 10, 9) above the prose (9, 8)
        assert out.rids == [3, 4, 1, 5, 2] and out.scores == [15.0, 10.0, 9.0, 9.0, 8.0]
    plain = SearchPlan(routes=(EvidenceRoute(goal=RouteGoal.QUERY, queries=("my cash back is wrong",)),))
    assert lift_procedures(fused, cat, plain, None, text_of) is fused  # not between two calls: unchanged


PAGES = {1: "Filing a Credit Card Transaction Dispute (Internal)\n\nCall file_credit_card_dispute(user_id, "
            "transaction_id, reason).",
         2: "Checking User Dispute History (Internal)\n\nCall get_user_dispute_history(user_id).",
         3: "Internal: Credit Card Retention Protocol\n\nCall get_retention_offers(user_id, credit_card_account_id).",
         4: "(Internal) Applying a Credit Card Statement Credit\n\nCall apply_statement_credit(user_id, amount).",
         5: "Internal: Downgrading a Credit Card\n\nCall downgrade_card(user_id, credit_card_account_id).",
         6: "Checking Pending Replacement Card Orders (Internal)\n\nCall get_pending_replacement_orders("
            "credit_card_account_id)."}


def test_below_the_first_pages_the_next_step_route_ranking_joins_the_fusion() -> None:
    cat = Catalog(generation=(0, 0))
    cat._append([(i, "turn", None, f"s{i}", None, 100.0 * i, "system", False, None) for i in range(1, 7)])
    cat._append([(10 + i, "procedure", i, f"s{i}", None, 100.0 * i, "system", False, None) for i in range(1, 7)])
    scores = [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    total = np.full(12, -np.inf)
    total[:6] = scores
    fused = Fused(total=total, rids=[1, 2, 3, 4, 5, 6], scores=scores)
    texts = {p: PAGES[p + 1] for p in range(6)}

    def pages(positions: Sequence[int]) -> dict[int, str]:
        return {p: texts[p] for p in positions if p in texts}

    asked = plan("credit_card_account_id user_id")
    route = np.zeros(12)
    route[:6] = [1.0, 1.0, 3.0, 1.0, 3.0, 2.5]  # the route: the pages that take the card account first
    without = lift_procedures(fused, cat, asked, None, pages)
    assert without.rids == [1, 2, 3, 4, 5, 6]  # every page takes a user_id or the account: the fusion's order
    out = lift_procedures(fused, cat, asked, None, pages, route=route)
    # the first three keep the fusion's order; below, fusion rank + route rank: 5 (4 + 1), 6 (5 + 2), 4 (3 + 5)
    assert out.rids == [1, 2, 3, 5, 6, 4]
    assert out.scores == fused.scores
