"""A small, general lexicon of everyday *kinds* of experience, for recalling an associated memory.

A conversation excerpt ("元旦晚会我要表演魔术！") should recall memories of the same kind (another performance:
"在圣诞节晚会上跳舞"), which share few words with it. :data:`KINDS` groups the words of common everyday experiences
(performances, competitions, exams, sports, outings, food, pets, illness, friends, family, holidays…), in Chinese
and English, written from general knowledge (a thesaurus's view), not from any benchmark's dialogues or memories.
:func:`kinds_in` finds the kinds an excerpt mentions (the more of a kind's words it uses, the earlier), and
:mod:`memory_ext.plan.expand` (``recall.associative_weight``) adds a route asking for each kind's words.

>>> [name for name, _ in kinds_in("元旦晚会我要表演魔术！")]
['performance', 'holiday']
>>> kinds_in("今天天气一般。")
[]
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["KINDS", "kinds_in"]

KINDS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "performance": ("表演", "演出", "晚会", "舞台", "跳舞", "舞蹈", "唱歌", "合唱", "魔术", "话剧", "节目", "观众",
                    "perform", "show", "stage", "dance", "sing", "concert", "recital", "play"),
    "competition": ("比赛", "冠军", "第一名", "获奖", "奖状", "奖牌", "得奖", "名次", "参赛", "竞赛", "奖",
                    "competition", "contest", "won", "win", "prize", "medal", "trophy", "champion"),
    "school": ("考试", "成绩", "作业", "老师", "表扬", "满分", "分数", "测验", "上课", "同学", "班上", "学习",
               "exam", "test", "grade", "homework", "teacher", "class", "school"),
    "sport": ("运动", "跑步", "游泳", "足球", "篮球", "羽毛球", "乒乓球", "体育", "骑车", "滑冰", "跳绳", "运动会",
              "sport", "run", "swim", "soccer", "football", "basketball", "tennis", "bike", "skate"),
    "outing": ("公园", "旅行", "旅游", "郊游", "爬山", "海边", "露营", "动物园", "游乐园", "博物馆", "出去玩", "野餐",
               "park", "trip", "travel", "beach", "camping", "hike", "zoo", "museum", "picnic"),
    "food": ("吃", "美食", "蛋糕", "冰淇淋", "火锅", "饺子", "餐厅", "做饭", "烤", "味道", "好吃", "零食",
             "food", "eat", "cake", "ice cream", "restaurant", "cook", "bake", "dinner", "lunch"),
    "pet": ("小狗", "小猫", "狗", "猫", "宠物", "兔子", "金鱼", "仓鼠", "鹦鹉",
            "dog", "cat", "puppy", "kitten", "pet", "rabbit", "fish", "hamster"),
    "illness": ("生病", "感冒", "发烧", "医院", "医生", "受伤", "摔倒", "疼", "看病", "打针", "吃药",
                "sick", "ill", "fever", "cold", "hospital", "doctor", "hurt", "injury"),
    "friends": ("朋友", "好朋友", "同学", "吵架", "和好", "一起玩", "生日", "聚会", "礼物",
                "friend", "friends", "party", "birthday", "gift", "argue", "quarrel"),
    "family": ("妈妈", "爸爸", "奶奶", "爷爷", "外婆", "外公", "姐姐", "哥哥", "弟弟", "妹妹", "家人", "家里",
               "mom", "dad", "mother", "father", "grandma", "grandpa", "sister", "brother", "family"),
    "holiday": ("春节", "过年", "元旦", "圣诞", "中秋", "国庆", "假期", "寒假", "暑假", "节日", "万圣节",
                "holiday", "christmas", "vacation", "new year", "festival", "halloween"),
    "art": ("画画", "画", "绘画", "手工", "做手工", "书法", "弹钢琴", "钢琴", "乐器", "小提琴", "拼图", "积木",
            "draw", "paint", "painting", "craft", "piano", "violin", "music", "lego"),
    "reading": ("看书", "读书", "书", "故事", "图书馆", "小说", "漫画",
                "book", "read", "story", "library", "novel", "comic"),
    "screen": ("电影", "动画片", "电视", "游戏", "玩游戏", "手机", "视频",
               "movie", "cartoon", "tv", "game", "video"),
})
"""kind -> its words (Chinese, then English)."""


def _count(text: str, low: str, word: str) -> int:
    if word.isascii():
        return 1 if f" {word}" in f" {low}" else 0
    return 1 if word in text else 0


def kinds_in(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The kinds ``text`` mentions, as ``(kind, its words)``, most words used first (ties: :data:`KINDS` order).
    A kind counts when the text uses at least one of its words (English words at a word start)."""
    low = text.lower()
    scored = [(sum(_count(text, low, w) for w in words), i, name, words)
              for i, (name, words) in enumerate(KINDS.items())]
    return [(name, words) for n, _, name, words in sorted(scored, key=lambda s: (-s[0], s[1])) if n > 0]
