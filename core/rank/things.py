"""Kinds of everyday things, read from the words and names that say them (pure functions, no model).

"I use an iPhone 12" and "I'm on a Pixel 8 now" speak of one attribute, the user's phone, without a word in common;
so do "我现在用的是华为Mate 40。" and "换了一台小米14。", "I drive a 2015 Honda Civic" and "I'm leasing a Tesla Model 3
now". :func:`thing_kinds` names the kinds of thing a text speaks of — by the class noun (phone, laptop, 手机, 电脑)
or by a brand or model name that stands for one (iPhone, Pixel, ThinkPad, MacBook, 华为, 小米, Tesla, 比亚迪) — so
that:

* two statements naming a thing of one kind share an anchor (:func:`memory_ext.rank.updates.frame_of`: the later
  one can update the earlier);
* a question asking for a thing of one kind ("What laptop do I use?", "我用什么电脑？") is not answered by a turn
  naming only things of another kind ("I'm on a Pixel 8 now"; :func:`memory_ext.rank.answer_slot.fills`).

The lexicon is small and general: devices and vehicles people own and replace, the things a user tells an assistant
about when they change. A brand that is also an ordinary English word (Pixel, Galaxy, Surface, Civic) counts only
capitalised.

>>> sorted(thing_kinds("I finally replaced the old iPhone — I'm on a Pixel 8 now."))
['phone']
>>> sorted(thing_kinds("公司给配了新的MacBook Pro，以后主要用这台了。")), sorted(thing_kinds("换了一台小米14。"))
(['computer'], ['phone'])
>>> thing_kinds("Each pixel of the screen is tiny.")
frozenset()
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["KIND_WORDS", "thing_kinds"]

KIND_WORDS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]] = {
    # kind: (class nouns, any case; names counted only capitalised; Chinese words)
    "phone": (("phone", "phones", "smartphone", "cellphone", "iphone", "android"),
              ("Pixel", "Galaxy", "Xiaomi", "Huawei", "OnePlus", "Nokia", "Motorola", "Oppo", "Vivo"),
              ("手机", "华为", "小米", "荣耀", "一加", "苹果手机", "安卓")),
    "computer": (("laptop", "laptops", "computer", "computers", "pc", "desktop", "macbook", "thinkpad", "chromebook",
                  "imac"),
                 ("XPS", "Surface", "Dell", "Lenovo", "Asus", "Acer", "Mac"),
                 ("电脑", "台式机", "笔记本电脑")),
    "tablet": (("tablet", "ipad", "kindle"), (), ("平板",)),
    "car": (("car", "cars", "tesla", "toyota", "honda", "bmw", "audi", "volkswagen", "vw", "corolla", "prius",
             "hyundai", "kia", "volvo", "subaru", "mazda", "nissan", "ford"),
            ("Civic",),
            ("汽车", "轿车", "开车", "新车", "买车", "车子", "特斯拉", "比亚迪", "丰田", "本田", "宝马", "奥迪",
             "大众汽车", "卡罗拉", "蔚来", "小鹏")),
    "editor": (("editor", "ide", "vscode", "vim", "neovim", "emacs", "intellij", "pycharm", "sublime"),
               ("VS Code", "Atom"), ("编辑器",)),
}
"""Kinds of thing by the words that say them: a class noun, a brand or model name standing for the kind."""


def _word_re(words: tuple[str, ...], *, ignore_case: bool) -> re.Pattern[str] | None:
    if not words:
        return None
    body = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z])(?:{body})(?![a-z])", re.IGNORECASE if ignore_case else 0)


_PATTERNS: Final = {kind: (_word_re(nouns, ignore_case=True), _word_re(names, ignore_case=False),
                           re.compile("|".join(map(re.escape, zh))) if zh else None)
                    for kind, (nouns, names, zh) in KIND_WORDS.items()}


def thing_kinds(text: str) -> frozenset[str]:
    """The kinds of thing (keys of :data:`KIND_WORDS`) that ``text`` names, by class noun, brand or model name."""
    return frozenset(kind for kind, patterns in _PATTERNS.items()
                     if any(p is not None and p.search(text) for p in patterns))
