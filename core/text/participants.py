"""Who a text is about, besides its speaker: the people (and pets) it names by their role, by a small lexicon, for
English and Chinese.

:func:`participants` returns the **roles** of :data:`ROLES` the text names someone by: a parent (``爸爸``,
``mum``), a grandparent, a sibling, a cousin, another relative, a teacher, a friend, a classmate, a neighbour, a pet.
``父母`` / ``parents`` name both parents, so they match a text about either. Proper names are not roles: the keyword
channels match them already, and capitalised words of English agent transcripts (products, tools, plans) are mostly
not people (as keys they re-ordered τ²-bench searches for the worse; on MADial they changed nothing).

A memory of an episode is kept by who took part in it as much as by what happened
(:mod:`memory_ext.retrieval.participants` ranks a conversation excerpt's memories by the participants they share).
The lexicon is written from general knowledge of how people refer to family and friends, not from any data set.

>>> sorted(participants("我今天听到妈妈和爸爸在争吵"))
['father', 'mother']
>>> sorted(participants("Bart和好朋友Jimmy一起在公园玩荡秋千"))
['friend']
>>> sorted(participants("Why do my parents always argue? My friend Tom says it's normal."))
['father', 'friend', 'mother']
>>> participants("今天天气很好")
frozenset()
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

__all__ = ["ROLES", "participants"]

ROLES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    # role: (Chinese substrings, English words)
    "father": (("爸", "父亲", "父母", "爹"), ("dad", "daddy", "father", "parent", "parents", "papa")),
    "mother": (("妈", "母亲", "父母"), ("mom", "mommy", "mum", "mummy", "mother", "parent", "parents", "mama")),
    "grandparent": (("爷爷", "奶奶", "外公", "外婆", "姥姥", "姥爷", "祖父", "祖母"),
                    ("grandpa", "grandma", "grandfather", "grandmother", "grandparent", "grandparents",
                     "granny")),
    "sibling": (("哥哥", "姐姐", "弟弟", "妹妹", "兄弟", "姐妹"), ("brother", "brothers", "sister", "sisters",
                                                             "sibling", "siblings")),
    "cousin": (("表哥", "表姐", "表弟", "表妹", "堂哥", "堂姐", "堂弟", "堂妹"), ("cousin", "cousins")),
    "relative": (("舅舅", "叔叔", "阿姨", "姑姑", "伯伯", "舅妈", "婶婶", "姑妈", "姨妈", "亲戚"),
                 ("uncle", "uncles", "aunt", "aunts", "auntie", "relative", "relatives")),
    "teacher": (("老师", "教练"), ("teacher", "teachers", "coach", "tutor")),
    "friend": (("朋友", "好友", "伙伴"), ("friend", "friends", "buddy", "pal")),
    "classmate": (("同学", "同桌", "同班"), ("classmate", "classmates", "schoolmate", "schoolmates")),
    "neighbour": (("邻居",), ("neighbor", "neighbors", "neighbour", "neighbours")),
    "pet": (("宠物", "狗", "猫", "乌龟", "兔子", "仓鼠", "鹦鹉"),
            ("pet", "pets", "dog", "dogs", "puppy", "cat", "cats", "kitten", "hamster", "rabbit", "parrot",
             "turtle")),
}
"""Role -> (Chinese substrings, English words, lower case). A Chinese term matches anywhere in the text (Chinese is
not spaced); an English word matches as a whole word, case-insensitively."""

_EN_WORD = re.compile(r"[A-Za-z]+")
_EN_ROLES = {word: tuple(r for r, (_, words) in ROLES.items() if word in words)
             for _, words in ROLES.values() for word in words}


@lru_cache(maxsize=4096)
def participants(text: str) -> frozenset[str]:
    """The participant keys of ``text`` (see the module docstring)."""
    found: set[str] = set()
    for role, (zh, _) in ROLES.items():
        if any(term in text for term in zh):
            found.add(role)
    for word in _EN_WORD.findall(text):
        found.update(_EN_ROLES.get(word.lower(), ()))
    return frozenset(found)
