"""Kinds of everyday things (:mod:`memory_ext.rank.things`): two statements naming a thing of one kind speak of one
attribute; a question asking for one kind is not answered by a turn naming another."""

from __future__ import annotations

import pytest

from memory_ext.rank.answer_slot import answer_slot, fills
from memory_ext.rank.things import thing_kinds
from memory_ext.rank.updates import restates


@pytest.mark.parametrize(("text", "kinds"), [
    ("I use an iPhone 12 for work and my personal stuff.", {"phone"}),
    ("I finally replaced the old iPhone — I'm on a Pixel 8 now.", {"phone"}),
    ("My main machine is a ThinkPad X1 with Fedora.", {"computer"}),
    ("The Civic finally died, so I'm leasing a Tesla Model 3 now.", {"car"}),
    ("我现在用的是华为Mate 40。", {"phone"}),
    ("我写代码用的是一台ThinkPad，装的Ubuntu。", {"computer"}),
    ("卡罗拉卖掉了，上周提了一辆比亚迪海豹。", {"car"}),
    ("VS Code, with the vim extension.", {"editor"}),
    # ordinary words, a paper notebook, a train: no thing of a kind
    ("Each pixel on this screen is tiny.", set()),
    ("I keep a notebook for my recipes.", set()),
    ("我妈坐高铁来北京。", set()),
])
def test_the_kinds_a_text_names(text: str, kinds: set[str]) -> None:
    assert thing_kinds(text) == kinds


@pytest.mark.parametrize(("older", "newer"), [
    ("我现在用的是华为Mate 40。", "旧手机屏幕摔坏了，换了一台小米14。"),
    ("我写代码用的是一台ThinkPad，装的Ubuntu。", "公司给配了新的MacBook Pro，以后主要用这台了。"),
    ("My phone is a Galaxy S21.", "I switched to a Pixel 8 last month."),
    ("VS Code, with the vim extension.", "I switched to Neovim full time last week, bye VS Code."),
])
def test_two_things_of_one_kind_are_one_attribute(older: str, newer: str) -> None:
    assert restates(older, newer)


@pytest.mark.parametrize(("older", "newer"), [
    ("I use an iPhone 12 for work.", "I bought a laptop, a Dell XPS 13, for the studio."),  # another kind
    ("我现在用的是华为Mate 40。", "公司给配了新的MacBook Pro，以后主要用这台了。"),
])
def test_things_of_two_kinds_are_two_attributes(older: str, newer: str) -> None:
    assert not restates(older, newer)


@pytest.mark.parametrize(("question", "turn", "filled"), [
    ("What laptop do I use?", "I finally replaced the old iPhone — I'm on a Pixel 8 now.", False),
    ("What laptop do I use?", "Got it. I'll give you Android steps from now on.", False),
    ("What laptop do I use?", "My laptop is a Dell XPS 13.", True),
    ("which phone do I have?", "I finally replaced the old iPhone — I'm on a Pixel 8 now.", True),
    ("我用什么电脑？", "旧手机屏幕摔坏了，换了一台小米14。", False),  # a counted thing, but a phone
    ("我用什么手机？", "旧手机屏幕摔坏了，换了一台小米14。", True),
])
def test_a_thing_of_another_kind_does_not_fill_the_slot(question: str, turn: str, filled: bool) -> None:
    assert fills(answer_slot(question), turn, question) is filled
