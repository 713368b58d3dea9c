"""The one definition of CJK characters: Han ideographs, kana and hangul, as regex class bodies and predicates.

Every module that tells Chinese (Japanese, Korean) text from Latin text uses these constants, so a character is
CJK everywhere or nowhere. The class bodies go inside ``[...]`` in a pattern:

>>> import re
>>> re.findall(f"[{HAN}]+", "I moved to 上海 in May")
['上海']
>>> has_han("Berlin"), has_han("柏林"), has_cjk("ソウル"), is_cjk_char("한")
(False, True, True, True)
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CJK", "CJK_RE", "HAN", "HANGUL", "HAN_RE", "KANA", "has_cjk", "has_han", "is_cjk_char"]

HAN: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
"""Han ideographs: the unified block, extension A, compatibility ideographs, extensions B-F (astral planes)."""
KANA: Final = "\u3040-\u30ff\u31f0-\u31ff"
"""Hiragana, katakana and the katakana phonetic extensions."""
HANGUL: Final = "\uac00-\ud7af"
"""Hangul syllables."""
CJK: Final = HAN + KANA + HANGUL
"""Every character written without spaces between words: Han, kana, hangul."""

HAN_RE: Final = re.compile(f"[{HAN}]")
CJK_RE: Final = re.compile(f"[{CJK}]")


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Han ideograph (cheap for ASCII text).

    >>> has_han("我住在北京"), has_han("I live in Beijing")
    (True, False)
    """
    return not text.isascii() and HAN_RE.search(text) is not None


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Han, kana or hangul character.

    >>> has_cjk("東京タワー"), has_cjk("Tokyo")
    (True, False)
    """
    return not text.isascii() and CJK_RE.search(text) is not None


def is_cjk_char(char: str) -> bool:
    """Whether the one character ``char`` is Han, kana or hangul.

    >>> is_cjk_char("猫"), is_cjk_char("a")
    (True, False)
    """
    return CJK_RE.fullmatch(char) is not None
