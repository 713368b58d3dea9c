"""The inspector on a server with tokens: the page asks for one (a labelled form), keeps it for the tab only, asks
again after a 401; a token pinned to a user sees that user and no other."""

from __future__ import annotations

import pytest

from tests.conftest import CONVERSATIONS, REQUIRE_BROWSER

from .conftest import ADMIN, MAYA, Served
from .test_inspector import conversation, rules_chat

if not REQUIRE_BROWSER:  # in CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright", reason="playwright is not installed; pip install \"memory-ext[test]\"")

from playwright.sync_api import Page, expect


def enter_token(page: Page, token: str) -> None:
    field = page.get_by_label("Bearer token")
    expect(field).to_be_visible()
    field.fill(token)
    page.get_by_role("button", name="Use this token").click()


@pytest.fixture(scope="module")
def stocked(token_server: Served) -> Served:
    """Maya's and Ben's memories on the token server."""
    token_server.add("maya", rules_chat())
    token_server.add("ben", conversation("ben"))
    return token_server


def test_the_page_asks_for_a_token_keeps_it_for_the_tab_and_asks_again_on_401(stocked: Served, page: Page) -> None:
    page.goto(stocked.url + "/")
    expect(page.get_by_role("heading", name="This server needs a token")).to_be_visible()
    expect(page.locator("#view")).not_to_contain_text("Nordea")

    enter_token(page, "not-a-token-of-this-server")
    expect(page.get_by_role("alert").filter(has_text="refused this token")).to_be_visible()

    enter_token(page, ADMIN)
    expect(page.get_by_role("link", name="maya", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="ben", exact=True)).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('memext-token')") == ADMIN
    assert page.evaluate("localStorage.length") == 0 and page.context.cookies() == []

    page.evaluate("sessionStorage.setItem('memext-token', 'revoked-token-0123456789')")  # e.g. rotated by SIGHUP
    page.get_by_role("link", name="ben", exact=True).click()
    expect(page.get_by_label("Bearer token")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('memext-token')") is None
    enter_token(page, ADMIN)
    expect(page.locator("#memories > li")).to_have_count(len(CONVERSATIONS["ben"]))

    fresh = page.context.browser.new_context()  # another tab's storage: asked again
    try:
        other = fresh.new_page()
        other.goto(stocked.url + "/?user_id=ben")
        expect(other.get_by_label("Bearer token")).to_be_visible()
        expect(other.locator("#view")).not_to_contain_text("marathon")
    finally:
        fresh.close()


def test_a_pinned_token_sees_only_its_user(stocked: Served, page: Page) -> None:
    page.goto(stocked.url + "/")
    enter_token(page, MAYA)
    expect(page.get_by_role("link", name="maya", exact=True)).to_be_visible()
    expect(page.locator("#who")).to_contain_text("token pinned to maya")
    expect(page.locator("table#overview tbody tr")).to_have_count(1)
    expect(page.get_by_role("link", name="ben", exact=True)).to_have_count(0)

    page.get_by_role("link", name="maya", exact=True).click()
    expect(page.locator("#memories > li")).to_have_count(8)

    ben_texts = [content for _, _, content in CONVERSATIONS["ben"]]
    with stocked.client() as admin:
        ben_id = admin.get("/v1/memories", params={"user_id": "ben"}).json()["items"][0]["id"]
    for path in ["/?user_id=ben", "/?user_id=ben&view=search&q=marathon", f"/?user_id=ben&view=history&id={ben_id}",
                 "/?user_id=ben&view=files"]:
        page.goto(stocked.url + path)
        expect(page.locator("#error")).to_contain_text("Permission denied: ")
        body = page.locator("body").inner_text()
        assert not any(text in body for text in ben_texts), path

    page.goto(stocked.url + "/?user_id=ben&view=data")  # the export button answers 403 too, and downloads nothing
    page.get_by_role("button", name="Export ben's memory").click()
    expect(page.locator("#error")).to_contain_text("Permission denied: ")
    with stocked.client() as admin:
        assert len(admin.get("/v1/memories", params={"user_id": "ben"}).json()["items"]) == len(ben_texts)
