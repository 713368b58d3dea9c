"""The inspector's pickers, empty states, busy state, agent runs, import target, error banners, keyboard use and
accessibility (axe-core, injected from the npm package .ci/run installs): what a person sees, checked in headless
chromium against ``memext serve``, and what it did to the store (checked over REST)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRE_BROWSER, RULES_CHAT

from .conftest import TIMEOUT_MS, Served
from .test_inspector import confirm, conversation, no_page_errors, receipt, rules_chat

if not REQUIRE_BROWSER:  # in CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright", reason="playwright is not installed; pip install \"memory-ext[test]\"")

from playwright.sync_api import Browser, Page, Route, expect


def settled(page: Page) -> None:
    """The view has rendered (its heading is there and no request is in flight)."""
    expect(page.locator("#view h1")).to_be_visible()
    page.locator("#view[aria-busy]").wait_for(state="detached")


def held_request(page: Page, held: list[Route]) -> None:
    """Wait until the page's request reached the test's route handler (which holds it: no answer yet)."""
    for _ in range(1000):  # each round trip to the browser lets Playwright dispatch the pending route event
        if held:
            assert len(held) == 1
            return
        page.evaluate("0")
    pytest.fail("the request never reached the route")


AGENT_RUN: list[dict[str, Any]] = [
    {"role": "user", "speaker": "Rui", "content": "Book me a table at Tasca for 8pm", "session_id": "run1"},
    {"role": "assistant", "content": "", "session_id": "run1",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "book_table", "arguments": '{"place": "Tasca", "time": "20:00"}'}}]},
    {"role": "tool", "content": "Error: no tables free at 20:00", "session_id": "run1",
     "metadata": {"tool_call_id": "c1", "status": "error"}},
    {"role": "assistant", "content": "", "session_id": "run1",
     "tool_calls": [{"id": "c2", "type": "function",
                     "function": {"name": "book_table", "arguments": '{"place": "Tasca", "time": "21:00"}'}}]},
    {"role": "tool", "content": "Booked: table 4 at 21:00", "session_id": "run1",
     "metadata": {"tool_call_id": "c2", "status": "ok"}},
    {"role": "assistant", "content": "Tasca was full at 8pm; you have table 4 at 9pm.", "session_id": "run1"},
]


# -- pickers ------------------------------------------------------------------------------------------------------

def test_users_and_agents_are_picked_from_the_overview(open_server: Served, page: Page) -> None:
    open_server.add("pia", conversation("ana")[:3])
    open_server.add("pia", conversation("ben")[:2], agent_id="coach")
    open_server.add("quin", conversation("chen")[:2])
    page.goto(open_server.url + "/?user_id=pia")
    settled(page)
    users = page.get_by_label("User", exact=True)
    assert {"pia", "quin"} <= set(users.locator("option").all_inner_texts())
    expect(users).to_have_value("pia")
    agents = page.get_by_label("Agent", exact=True)
    assert agents.locator("option").all_inner_texts() == ["no agent", "coach"]
    agents.select_option("coach")
    expect(page).to_have_url(open_server.url + "/?user_id=pia&agent_id=coach")
    expect(page.locator("#memories > li")).to_have_count(2)

    page.get_by_role("link", name="Search", exact=True).click()
    settled(page)
    page.get_by_label("User", exact=True).select_option("quin")  # the view is kept, the agent is not
    expect(page).to_have_url(open_server.url + "/?user_id=quin&view=search")
    expect(page.get_by_role("heading", name="Search quin's memory")).to_be_visible()
    page.get_by_label("User", exact=True).select_option("")
    expect(page).to_have_url(open_server.url + "/")
    expect(page.locator("table#overview")).to_be_visible()
    no_page_errors(page)


# -- relevance and empty states --------------------------------------------------------------------------------------

def test_a_nonsense_query_says_nothing_relevant_and_folds_the_weak_matches(open_server: Served, page: Page) -> None:
    open_server.add("rita", rules_chat("rita"))
    page.goto(open_server.url + "/?user_id=rita&view=search&q=quantum+zebra+xylophone")
    settled(page)
    with open_server.client() as c:
        found = c.post("/v1/search", json={"user_id": "rita", "query": "quantum zebra xylophone"}).json()["items"]
        kept = c.post("/v1/search", json={"user_id": "rita", "query": "quantum zebra xylophone",
                                          "min_score": 0.5}).json()["items"]
    assert found and all(item["score"] < 0.5 for item in found) and kept == []
    empty = page.locator("#empty")
    expect(empty).to_contain_text("Nothing relevant found for “quantum zebra xylophone”.")
    expect(empty).to_contain_text(f"the nearest {len(found)} turns are listed below as weak matches")
    expect(page.locator("#results")).to_have_count(0)
    weak = page.locator("details#weak")
    expect(weak).not_to_have_attribute("open", "")
    expect(weak.locator("summary")).to_have_text(f"{len(found)} weak matches (score below 0.5)")
    expect(page.locator("#weak-results > li").first).to_be_hidden()
    weak.locator("summary").press("Enter")  # the fold opens from the keyboard too
    expect(page.locator("#weak-results > li")).to_have_count(len(found))

    page.goto(open_server.url + "/?user_id=nobody-here&view=search&q=anything")  # a user with nothing
    settled(page)
    expect(page.locator("#empty")).to_contain_text("Nothing relevant found for “anything”.")
    expect(page.locator("#empty")).to_contain_text("nobody-here has no memories to search.")
    page.goto(open_server.url + "/?user_id=nobody-here&view=forget")
    settled(page)
    expect(page.locator("#no-sessions")).to_have_text("nobody-here has no sessions to forget.")
    no_page_errors(page)


def test_an_empty_store_explains_how_memories_arrive(tmp_path_factory: pytest.TempPathFactory, page: Page) -> None:
    from .conftest import _serve

    served = _serve(tmp_path_factory, "empty")
    server = next(served)
    try:
        page.goto(server.url + "/")
        settled(page)
        expect(page.locator("#empty")).to_contain_text("The store holds no memories yet.")
        expect(page.locator("#empty")).to_contain_text("save_memory")
        page.get_by_label("Open a user by id").fill("sam")
        page.get_by_role("button", name="Open", exact=True).click()
        expect(page).to_have_url(server.url + "/?user_id=sam")
        expect(page.locator("#empty")).to_contain_text("sam has no memories yet.")
        no_page_errors(page)
    finally:
        served.close()


def test_an_error_banner_says_its_sentence_once(open_server: Served, page: Page) -> None:
    open_server.add("sol", conversation("ana")[:2])
    page.goto(open_server.url + "/?user_id=sol&view=search&q=beagle&k=0")
    banner = page.locator("#error")
    expect(banner).to_be_visible()
    with open_server.client() as c:
        error = c.post("/v1/search", json={"user_id": "sol", "query": "beagle", "k": 0}).json()["error"]
    assert error["fix"] in error["message"], "the engine's message carries its fix: the page must not repeat it"
    text = banner.inner_text()
    assert text.count(error["fix"]) == 1, text
    expect(banner).to_contain_text("Invalid query: k: got 0")
    expect(banner.locator(".fix")).to_have_text(f"Fix: {error['fix']}")
    assert "InvalidQueryError" not in text


# -- agent runs -----------------------------------------------------------------------------------------------------

def test_agent_runs_show_tool_calls_and_tool_errors(open_server: Served, page: Page) -> None:
    open_server.add("rui", AGENT_RUN, agent_id="concierge")
    page.goto(open_server.url + "/?user_id=rui&agent_id=concierge")
    cards = page.locator("#memories > li")
    expect(cards).to_have_count(len(AGENT_RUN))
    calls = page.locator("ul.calls li")
    expect(calls).to_have_text(["Called book_table(place: Tasca, time: 21:00)",
                                "Called book_table(place: Tasca, time: 20:00)"])  # newest first
    failed = cards.filter(has_text="no tables free")
    expect(failed.locator(".tool-error")).to_contain_text("Tool error (call c1)")
    ok = cards.filter(has_text="Booked: table 4")
    expect(ok.locator(".tool")).to_contain_text("Tool result (call c2)")
    for card in cards.all():  # no empty assistant line: every card says something
        body = card.locator(".content, ul.calls").all_inner_texts()
        assert any(text.strip() for text in body), card.inner_text()
    expect(page.locator(".content.muted")).to_have_count(0)

    cards.filter(has=page.locator("ul.calls")).first.get_by_role("link", name="Open memory book_table").click()
    settled(page)
    expect(page.locator("#view h1")).to_have_text("book_table(place: Tasca, time: 21:00)")  # not an id
    expect(page.locator(".edit ul.calls")).to_contain_text("Called book_table(place: Tasca, time: 21:00)")

    page.goto(open_server.url + "/?user_id=rui&agent_id=concierge&view=search&q=book+a+table+at+Tasca")
    settled(page)  # search items of tool-call turns (no text) show their calls too
    page.locator("details#weak > summary").click()
    expect(page.locator("#weak-results ul.calls li")).to_have_count(2)
    expect(page.locator("#weak-results .tool-error")).to_contain_text("Tool error (call c1)")
    expect(page.locator(".content.muted")).to_have_count(0)
    no_page_errors(page)


# -- import: whose memory, before it runs; the busy state ------------------------------------------------------------

def test_a_mem0_import_shows_and_lets_you_choose_its_target_user_and_is_busy_meanwhile(
        open_server: Served, page: Page, tmp_path: Path) -> None:
    mem0 = {"results": [
        {"id": "m-1", "memory": "Lena moved to Coimbra", "user_id": "lena", "created_at": "2026-02-01T10:00:00Z"},
        {"id": "m-2", "memory": "Lena teaches chemistry", "user_id": "lena", "created_at": "2026-02-02T10:00:00Z"},
        {"id": "m-3", "memory": "Prefers window seats", "created_at": "2026-02-03T10:00:00Z"},
    ]}
    path = tmp_path / "mem0-export.json"
    path.write_text(json.dumps(mem0), encoding="utf-8")
    open_server.add("uma", conversation("ana")[:1])
    page.goto(open_server.url + "/?user_id=uma&view=data")
    settled(page)
    submit = page.get_by_role("button", name="Import", exact=True)
    expect(submit).to_be_disabled()
    page.get_by_label("Export file").set_input_files(str(path))
    preview = page.locator("#import-preview")
    expect(page.get_by_label("Format")).to_have_value("mem0")  # read from the file
    expect(preview).to_contain_text("Entries that name their user go to them: lena (2 entries).")
    expect(preview).to_contain_text("1 entry names no user: it goes to uma.")
    target = page.get_by_label("Import entries without a user into")
    target.fill("vic")
    expect(preview).to_contain_text("1 entry names no user: it goes to vic.")

    held: list[Route] = []
    page.route("**/v1/import*", lambda route: held.append(route))  # held until the busy state is seen
    submit.click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("into lena, vic")
    confirm(page, "Import")
    busy = page.locator("#busy")
    expect(busy).to_be_visible()
    expect(busy).to_have_text("Importing…")
    expect(busy).to_have_attribute("role", "status")
    expect(submit).to_be_disabled()
    held_request(page, held)
    held[0].continue_()
    page.unroute("**/v1/import*")
    report = receipt(page, "Imported", "Imported 3 turns into lena, vic.")
    assert isinstance(report, dict) and report["turns"] == 3
    expect(busy).to_be_hidden()
    assert [m["content"] for m in open_server.memories("lena")] == ["Lena teaches chemistry", "Lena moved to Coimbra"]
    assert [m["content"] for m in open_server.memories("vic")] == ["Prefers window seats"]
    assert len(open_server.memories("uma")) == 1  # the page's user got nothing
    receipt_box = page.locator("#receipt")
    receipt_box.get_by_role("link", name="lena").click()
    expect(page).to_have_url(open_server.url + "/?user_id=lena")
    no_page_errors(page)


def test_a_slow_search_shows_the_busy_state(open_server: Served, page: Page) -> None:
    open_server.add("wes", conversation("ana"))
    held: list[Route] = []
    page.goto(open_server.url + "/?user_id=wes")
    settled(page)
    page.route("**/v1/search", lambda route: held.append(route))
    box = page.get_by_role("searchbox", name="Search query")
    box.fill("beagle")
    box.press("Enter")
    expect(page.locator("#busy")).to_have_text("Searching…")
    expect(page.locator("main")).to_have_attribute("aria-busy", "true")
    held_request(page, held)
    held[0].continue_()
    page.unroute("**/v1/search")
    expect(page.locator("#results > li").first).to_contain_text("Toby")
    expect(page.locator("#busy")).to_be_hidden()
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")


# -- keyboard ----------------------------------------------------------------------------------------------------------

def test_the_keyboard_reaches_forget_and_escape_cancels_it(open_server: Served, page: Page) -> None:
    open_server.add("xia", conversation("ben")[:2])
    memory_id = open_server.memories("xia")[0]["id"]
    page.goto(f"{open_server.url}/?user_id=xia&view=history&id={memory_id}")
    settled(page)
    page.locator("body").focus()
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "forget-memory":
            break
    else:
        pytest.fail("Tab never reached the Forget this memory button")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid", "keyboard focus is visible (:focus-visible outline)"
    page.keyboard.press("Enter")
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    assert page.evaluate("document.activeElement.id") == "confirm-cancel", "a destructive dialog focuses Cancel"
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert len(open_server.memories("xia")) == 2  # nothing forgotten


# -- accessibility: axe-core ------------------------------------------------------------------------------------------

AXE_RUN = """async () => {
  const result = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a",
                                                                              "wcag21aa", "best-practice"] } });
  return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target) }));
}"""


def test_no_serious_accessibility_violation_at_both_widths(open_server: Served, browser: Browser,
                                                           axe_script: Path) -> None:
    """axe-core (WCAG 2.1 A/AA, contrast included) finds no serious or critical violation on any view, with
    every fold open, a receipt shown and the confirmation dialog open. The page's CSP forbids inline scripts, so
    this context bypasses it to inject axe (the other tests keep it)."""
    open_server.add("yara", rules_chat("yara"))
    open_server.add("yara", AGENT_RUN, agent_id="concierge")
    views = ["/", "/?user_id=yara", "/?user_id=yara&view=search&q=Lisbon+flight&explain=1",
             "/?user_id=yara&view=search&q=quantum+zebra", "/?user_id=yara&view=history&id=yara%3A4",
             "/?user_id=yara&view=files", "/?user_id=yara&view=data", "/?user_id=yara&view=forget",
             "/?user_id=yara&agent_id=concierge", "/?user_id=nobody"]
    for width in (1440, 390):
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        try:
            page.goto(open_server.url + "/")  # the checker works: a pale line on white is a serious violation
            settled(page)
            page.add_script_tag(path=str(axe_script))
            page.evaluate("""() => { const p = document.createElement("p"); p.id = "pale"; p.textContent = "pale text";
                p.style.color = "#c8c8c8"; document.getElementById("view").append(p); }""")
            assert "color-contrast" in [v["id"] for v in page.evaluate(AXE_RUN)]
            for view in views:
                page.goto(open_server.url + view)
                settled(page)
                for details in page.locator("#view details").all():
                    details.evaluate("(el) => { el.open = true; }")
                page.add_script_tag(path=str(axe_script))
                found = page.evaluate(AXE_RUN)
                assert found == [], f"{width} px {view}: {json.dumps(found, indent=1)}"
            # a receipt, then the confirmation dialog
            page.goto(open_server.url + "/?user_id=yara&view=history&id=yara%3A4")
            settled(page)
            page.get_by_label("Content of the new version").fill("We fly to Lisbon on Sunday instead.")
            page.get_by_role("button", name="Save as a new version").click()
            confirm(page, "Save")
            expect(page.locator("#receipt")).to_be_visible()
            page.locator("#receipt details.raw").evaluate("(el) => { el.open = true; }")
            page.add_script_tag(path=str(axe_script))
            assert page.evaluate(AXE_RUN) == [], f"{width} px: the receipt"
            page.get_by_role("button", name="Forget this memory").click()
            expect(page.locator("dialog#confirm")).to_be_visible()
            assert page.evaluate(AXE_RUN) == [], f"{width} px: the dialog"
            page.keyboard.press("Escape")
        finally:
            context.close()
    assert len(open_server.memories("yara")) == len(RULES_CHAT)
