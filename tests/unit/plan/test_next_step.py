"""Manuals become procedure records, and the next-step route finds the manual of the step after the last call:
the procedure that takes the parameters the agent already holds, though no message names its tool."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory_ext import ActionState, MemoryEngine, Turn, derive_action_state
from memory_ext.ingest.kinds import derive_kinds
from memory_ext.models import SearchPlan
from memory_ext.plan.derive import turns_from_messages
from memory_ext.plan.heuristic import plan_search
from memory_ext.plan.procedures import NEXT_STEP_ROUTE, argument_names, fit_to_store, next_step_routes, used_tools
from memory_ext.retrieval.procedures import action_shaped

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
MANUALS = {
    "cashback-faq": ("Think You're Missing Cash Back? Here's How to Get Help",
                     "If your cash back rewards look wrong, don't worry. Cash back is credited after each statement "
                     "closes. Check your rewards summary in the app, and contact us if a cash back amount still "
                     "looks wrong after two statements."),
    "rewards-tips": ("Getting the Most from Your Cash Back Rewards",
                     "Use your card for groceries and travel to earn more cash back rewards. Rewards appear on your "
                     "statement; cash back can be redeemed as a statement credit at any time."),
    "dispute": ("Submitting a Cash Back Dispute (Internal)",
                "Use this process when a customer believes a transaction earned the wrong amount.\n\n"
                "- Tool to provide to the user: `submit_cash_back_dispute(user_id: str, transaction_id: str)`\n"
                "- Tell the customer to run the tool with their own user_id and the transaction_id in question."),
    "card-replacement": ("How to Order a Replacement Card (Internal)",
                         "When a card is lost or damaged, call order_replacement_card with the arguments below.\n"
                         "- credit_card_account_id (string, required)\n- shipping_address (string, required)\n"
                         "- expedited_shipping (boolean)"),
    "statement-credit": ("Request a Statement Credit or Fee Adjustment",
                         "If a fee or a cash back amount on your statement looks wrong, ask us to check it. We review "
                         "the rewards on each statement and fix what is wrong with a statement credit."),
    "rewards-faq": ("FAQ: Cash Back Rewards", "Why are my cash back rewards lower than I expected? Some purchases earn "
                                              "less cash back. Check the rewards categories; if your cash back is "
                                              "still wrong, we can help fix it."),
    "branch-hours": ("Branch Hours", "Our branches open at 9am on weekdays. Cash back questions are answered by "
                                     "phone, in the app and at any branch."),
}
REQUEST = "Hi, I think some of my cash back rewards are wrong. Can you check them and fix what is wrong?"
MESSAGES = [
    {"role": "user", "content": REQUEST},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "invoke_helper",
        "arguments": json.dumps({"helper": "list_transactions", "arguments": json.dumps({
            "user_id": "u-755", "transaction_id": "txn_a8f1"})})}}]},
]


def _manual(doc_id: str) -> str:
    title, body = MANUALS[doc_id]
    return f"{title}\n\n{body}"


def _engine(tmp_path: Path) -> MemoryEngine:
    from memory_ext.embed import HashingEmbedder

    engine = MemoryEngine.open(tmp_path / "m", embedder=HashingEmbedder())
    engine.add_turns([Turn(role="system", content=_manual(d), session_id=d, external_id=d,
                           timestamp=T0 + timedelta(minutes=n)) for n, d in enumerate(MANUALS)], "agent", wait=True)
    return engine


def test_a_manual_that_documents_a_tool_becomes_a_procedure_and_prose_does_not() -> None:
    turns = [{"id": d, "role": "system", "content": _manual(d), "ts": 0.0, "session_id": d} for d in MANUALS]
    procedures = {r.anchor_turn_id: r for r in derive_kinds(turns, 0) if r.kind.value == "procedure"}
    assert set(procedures) == {"dispute", "card-replacement"}
    assert procedures["dispute"].text.startswith("how to Submitting a Cash Back Dispute (Internal): "
                                                 "submit_cash_back_dispute(user_id, transaction_id")
    assert "shipping_address" in procedures["card-replacement"].index_text


def test_the_next_step_route_finds_the_manual_that_takes_what_the_agent_holds(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    try:
        state = derive_action_state(turns_from_messages(MESSAGES))
        assert "submit_cash_back_dispute" not in state.model_dump_json()  # nothing in the state names the tool
        with_state = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=10, action_state=state).items]
        query_only = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=10).items]
    finally:
        engine.close()
    assert "dispute" in with_state[:3], with_state
    assert "dispute" not in query_only[:3], query_only  # the request alone ranks the cash back prose first


def test_the_route_follows_a_call_only_while_nothing_failed_or_is_missing() -> None:
    args = {"user_id": "u-755", "transaction_id": "txn_a8f1"}

    def routes(**state: object) -> dict[str, float]:
        plan = plan_search("fix my cash back", now=None, speakers=(), action_state=ActionState(
            last_tool_name="list_transactions", last_tool_args=args, **state))  # type: ignore[arg-type]
        return {r.name: r.weight for r in fit_to_store(plan, has_procedures=True).routes}

    plan = plan_search("fix my cash back", now=None, speakers=(), action_state=ActionState(
        last_tool_name="list_transactions", last_tool_args=args))
    assert {r.name: r.queries for r in plan.routes}[NEXT_STEP_ROUTE] == ("user_id transaction_id",)
    assert "action" not in routes()  # between two calls the action route would ask for the step behind
    assert NEXT_STEP_ROUTE not in routes(failure_signal="HTTP 500")
    assert routes(missing_slots=("account_id",))["action"] == 0.5  # a missing slot keeps the action route
    # a store without procedures: no next-step route, the action route as it was
    assert {r.name: r.weight for r in fit_to_store(plan, has_procedures=False).routes} == {"query": 1.0, "action": 0.5}


def test_an_argument_that_names_a_tool_gives_its_name_and_an_id_gives_its_parameter() -> None:
    assert argument_names({"agent_tool_name": "get_user_dispute_history_7291", "account_id": "cc_8903_silver",
                           "transaction_id": "txn_a8f1", "arguments": {"user_id": "u-755"}}) == [
        "get_user_dispute_history_7291", "account_id", "transaction_id", "user_id"]


def test_a_value_left_out_gives_nothing_but_a_call_of_placeholders_keeps_its_slots() -> None:
    # a wrapper whose tool name a log hid: the inner call's parameters say what the step works with
    assert argument_names({"agent_tool_name": "[hidden]", "arguments": '{"card_id": "c1", "reason": "lost"}'}) == [
        "card_id", "reason"]
    assert argument_names({"tool": "<redacted>", "account_id": "***", "user_id": "u-755"}) == ["user_id"]
    # nothing but placeholders: the slots' names are all the call says
    assert argument_names({"agent_tool_name": "[hidden]"}) == ["agent_tool_name"]


def _lift_plan(**state: object) -> SearchPlan:
    plan = plan_search(REQUEST, now=None, speakers=(), action_state=ActionState(
        last_tool_name="list_transactions", last_tool_args={"user_id": "u-755"}, **state))  # type: ignore[arg-type]
    return fit_to_store(plan, has_procedures=True)


def test_only_a_plan_with_a_next_step_route_and_nothing_missing_is_action_shaped() -> None:
    assert action_shaped(_lift_plan())
    assert not action_shaped(_lift_plan(failure_signal="HTTP 500"))
    assert not action_shaped(_lift_plan(missing_slots=("account_id",)))
    assert not action_shaped(plan_search(REQUEST, now=None, speakers=(), action_state=None))
    assert not action_shaped(fit_to_store(plan_search(REQUEST, now=None, speakers=(), action_state=ActionState(
        last_tool_name="list_transactions", last_tool_args={"user_id": "u-755"})), has_procedures=False))


def test_between_two_calls_the_tool_pages_rank_above_the_prose(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    state = ActionState(current_subgoal=REQUEST, last_tool_name="lookup_customer",
                        last_tool_args={"customer_email": "a@b.c"})  # a step that says nothing of the next one
    try:
        between = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=7, action_state=state).items]
        plain = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=7).items]
        failed = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=7, action_state=state.model_copy(
            update={"failure_signal": "HTTP 500"})).items]
    finally:
        engine.close()
    tool_pages = {"dispute", "card-replacement"}
    assert set(between[:2]) == tool_pages, between
    assert set(plain[:2]) != tool_pages, plain  # the request alone ranks the cash back prose first
    assert set(failed[:2]) != tool_pages, failed  # after a failure the lesson's route decides, not the lift


def test_derive_keeps_the_recent_calls_and_the_tools_they_used() -> None:
    messages = [*MESSAGES, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "invoke_helper", "arguments": json.dumps({"helper": "[hidden]"})}}]}]
    state = derive_action_state(turns_from_messages(messages))
    assert [c["name"] for c in state.recent_calls] == ["invoke_helper", "invoke_helper"]
    assert state.recent_calls[0]["args"]["helper"] == "list_transactions"
    assert used_tools(state) == {"invoke_helper", "list_transactions"}


def test_the_page_of_a_tool_already_used_is_not_lifted(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    state = ActionState(current_subgoal=REQUEST, last_tool_name="lookup_customer",
                        last_tool_args={"customer_email": "a@b.c"})
    used = state.model_copy(update={"recent_calls": (
        {"name": "submit_cash_back_dispute", "args": {"user_id": "u-755", "transaction_id": "txn_a8f1"}},
        {"name": "lookup_customer", "args": {"customer_email": "a@b.c"}})})
    try:
        fresh = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=7, action_state=state).items]
        after = [i.external_ids[0] for i in engine.search(REQUEST, "agent", k=7, action_state=used).items]
    finally:
        engine.close()
    assert fresh.index("dispute") < 2, fresh
    assert after[0] == "card-replacement" and after.index("dispute") > 1, after  # the step behind the agent


def test_after_a_call_whose_values_were_all_left_out_the_route_asks_for_the_call_before() -> None:
    earlier = {"name": "invoke_helper", "args": {"helper": "list_transactions", "arguments": '{"user_id": "u-755"}'}}
    hidden = {"name": "unlock_helper", "args": {"helper": "[hidden]"}}
    state = ActionState(last_tool_name="unlock_helper", last_tool_args=hidden["args"], recent_calls=(earlier, hidden))
    assert [r.queries for r in next_step_routes(state)] == [("list_transactions user_id",)]
    # without the earlier calls (a state built by hand): the slots' names, as before
    alone = state.model_copy(update={"recent_calls": ()})
    assert [r.queries for r in next_step_routes(alone)] == [("helper",)]


def test_a_call_that_identified_records_asks_for_them_not_for_its_other_inputs() -> None:
    verified = ActionState(last_tool_name="log_verification", last_tool_args={
        "name": "Ana Lima", "user_id": "u-755", "email": "ana@example.com", "date_of_birth": "1990-01-02"})
    assert [r.queries for r in next_step_routes(verified)] == [("user_id",)]
    wrapped = ActionState(last_tool_name="call_tool", last_tool_args={
        "tool": "get_history", "arguments": '{"account_id": "a1", "limit": 5}'})
    assert [r.queries for r in next_step_routes(wrapped)] == [("get_history account_id",)]
    # no record identified: every name, as before
    plain = ActionState(last_tool_name="search", last_tool_args={"city": "Lisbon", "check_in": "2026-04-14"})
    assert [r.queries for r in next_step_routes(plain)] == [("city check_in",)]
