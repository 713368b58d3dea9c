"""Text utilities: the mixed Chinese/English BM25 tokenizer and the token estimate.

Importing this package is cheap: jieba and its dictionary load on first use (or :func:`warm_up`).
"""

from memory_ext.text.entities import EN_STOP_CAPS, TAGS, extract_entities, extract_tags, query_names
from memory_ext.text.timeexpr import TimeMention, extract_times, mention_overlaps, parse_absolute_date
from memory_ext.text.tokenize import (
    EN_STOP_WORDS,
    ZH_STOP_CHARS,
    cjk_ratio,
    estimate_tokens,
    tokenize,
    warm_up,
)

__all__ = [
    "EN_STOP_CAPS",
    "EN_STOP_WORDS",
    "TAGS",
    "TimeMention",
    "ZH_STOP_CHARS",
    "cjk_ratio",
    "estimate_tokens",
    "extract_entities",
    "extract_tags",
    "extract_times",
    "mention_overlaps",
    "parse_absolute_date",
    "query_names",
    "tokenize",
    "warm_up",
]
