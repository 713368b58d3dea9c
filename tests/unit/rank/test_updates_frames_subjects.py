"""Who a statement is about decides whether a later one replaces it (rank.updates)."""

from __future__ import annotations

from memory_ext.rank.updates import restates


def test_a_place_both_mention_is_no_shared_subject() -> None:
    """The sister lives in Lyon; I take a train to Lyon on Friday: both true, neither replaces the other."""
    assert not restates("My sister Clara lives in Lyon.", "Ich nehme den Zug nach Lyon am Freitag.")
    assert not restates("My sister Clara lives in Lyon.", "I'm taking the train to Lyon on Friday.")
    assert restates("My sister Clara lives in Lyon.", "Clara moved to Grenoble in March.")


def test_a_chinese_kinship_word_and_its_doubled_form_are_one_person() -> None:
    assert restates("我妈妈下个月十号来北京看我，坐高铁。", "我妈改签了，变成十二号下午到，还是北京南站。")
    assert not restates("我妹妹住在杭州。", "我下周三去杭州出差。")
