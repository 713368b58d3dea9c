"""Conflicts between claims, for supersession: two claims about the same subject and the same single-valued
attribute with different values (or the same value with the opposite polarity).

Claims come from the one claims extractor, :mod:`memory_ext.ingest.claims` (re-exported here), which also
feeds the derived fact and preference records. The engine uses :func:`conflicts` to mark the older memory
superseded (:mod:`memory_ext.lifecycle.supersede`).

>>> new = extract_claims("I moved to Berlin last month.")
>>> old = extract_claims("I live in Paris")
>>> [(n.value, o.value) for n, o in find_conflicts(new, old)]
[('berlin', 'paris')]
>>> find_conflicts(extract_claims("我搬到了上海"), extract_claims("我住在北京"))[0][0].attribute
'residence'
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_ext.ingest.claims import ATTRIBUTES, Claim, extract_claims, normalize_value
from memory_ext.text.script import has_han

__all__ = ["ATTRIBUTES", "Claim", "conflicts", "extract_claims", "find_conflicts", "normalize_value"]

_ADDITIVE = frozenset({"pet"})
"""Attributes where several values may hold at once: only the same value with the opposite polarity conflicts."""
_IMPLIES: dict[tuple[str, str], frozenset[str]] = {("diet", "vegan"): frozenset({"vegetarian"})}
"""A value implied by another value of the same attribute (vegan -> vegetarian)."""



def _script(value: str) -> str:
    return "han" if has_han(value) else "latin"


def conflicts(new: Claim, old: Claim) -> bool:
    """True when ``new`` contradicts ``old`` (so ``old`` should be superseded).

    Same subject and attribute, and either a different value (both affirmed; not for
    additive attributes such as ``pet``) or the same value with opposite polarity.
    Values written in different scripts ("柏林" vs "berlin") are not compared.

    >>> conflicts(Claim("self", "residence", "berlin"), Claim("self", "residence", "paris"))
    True
    >>> conflicts(Claim("self", "opinion:sushi", "like", True), Claim("self", "opinion:sushi", "like"))
    True
    >>> conflicts(Claim("self", "pet", "cat"), Claim("self", "pet", "dog"))
    False
    """
    if new.subject != old.subject or new.attribute != old.attribute:
        return False
    a, b = normalize_value(new.value), normalize_value(old.value)
    if a == b:
        return new.negated != old.negated
    if new.negated != old.negated:
        neg, pos = (new, old) if new.negated else (old, new)
        implied = _IMPLIES.get((pos.attribute, normalize_value(pos.value)), frozenset())
        return normalize_value(neg.value) in implied
    if new.negated or new.attribute in _ADDITIVE:
        return False
    return _script(a) == _script(b)


def find_conflicts(
    new_claims: Sequence[Claim], old_claims: Sequence[Claim]
) -> list[tuple[Claim, Claim]]:
    """All (new, old) pairs where the new claim contradicts the old one, in input order.

    >>> pairs = find_conflicts(extract_claims("I hate sushi"), extract_claims("I love sushi. I live in Oslo."))
    >>> [(n.attribute, n.negated, o.negated) for n, o in pairs]
    [('opinion:sushi', True, False)]
    """
    by_key: dict[tuple[str, str], list[Claim]] = {}
    for old in old_claims:
        by_key.setdefault((old.subject, old.attribute), []).append(old)
    out: list[tuple[Claim, Claim]] = []
    for new in new_claims:
        for old in by_key.get((new.subject, new.attribute), ()):
            if conflicts(new, old):
                out.append((new, old))
    return out
