"""Text utilities: the mixed Chinese/English BM25 tokenizer and the token estimate.

Importing this package is cheap: jieba and its dictionary load on first use (or :func:`warm_up`).
"""

from memory_ext.text.tokenize import (
    EN_STOP_WORDS,
    ZH_STOP_CHARS,
    cjk_ratio,
    estimate_tokens,
    tokenize,
    warm_up,
)

__all__ = [
    "EN_STOP_WORDS",
    "ZH_STOP_CHARS",
    "cjk_ratio",
    "estimate_tokens",
    "tokenize",
    "warm_up",
]
