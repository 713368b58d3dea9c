"""A small, general class lexicon: a class word a question names ("instruments") -> instances a turn states.

A question often names a class ("What instruments does Melanie play?") where the memory names an instance
("…or playing my violin"); neither BM25 nor e5-small links the two (e5-small's cosine of "cities" is as high to
"hiking" as to "Rome"). :data:`CLASSES` lists common conversational classes with instances written from general
knowledge (a thesaurus's view of each class), not from any benchmark's questions or answers. Each entry is
``(trigger, instances)``: ``trigger`` a regular expression over a lower-cased question (word boundaries included),
``instances`` the words a turn would say. It is used by :mod:`memory_ext.plan.expand` (``recall.expansion``).

>>> [name for name, _ in classes_in("What instruments does Melanie play?")]
['instrument']
>>> classes_in("When did Caroline go to the support group?")
[]
"""

from __future__ import annotations

import re
from types import MappingProxyType

__all__ = ["CLASSES", "classes_in"]

_RAW: dict[str, tuple[str, str]] = {
    "instrument": (r"\binstruments?\b|\bplay(s|ed|ing)? music\b",
                   "violin guitar piano drums cello flute clarinet saxophone trumpet ukulele bass harp keyboard "
                   "trombone banjo harmonica accordion oboe viola"),
    "city": (r"\bcit(y|ies)\b|\btowns?\b",
             "Paris London Rome Tokyo Berlin Madrid Barcelona Amsterdam Prague Vienna Venice Florence Milan "
             "Lisbon Dublin Athens Istanbul Dubai Sydney Toronto Vancouver Chicago Boston Seattle Miami York "
             "Angeles Francisco Vegas Beijing Shanghai Seoul Bangkok Singapore Mumbai Delhi Cairo Moscow "
             "Stockholm Copenhagen Oslo Helsinki Edinburgh Munich Zurich Brussels city downtown"),
    "country": (r"\bcountr(y|ies)\b|\bnations?\b|\babroad\b",
                "France Italy Spain Germany Japan China India Mexico Canada Brazil Sweden Norway Greece "
                "Portugal Ireland England Scotland Australia Thailand Egypt Turkey Netherlands Switzerland "
                "Korea Peru Argentina Kenya Vietnam country abroad"),
    "pet": (r"\bpets?\b|\banimals?\b",
            "dog dogs puppy cat cats kitten bird parrot hamster rabbit bunny fish turtle horse guinea pig "
            "snake lizard pup"),
    "sport": (r"\bsports?\b|\bwork(s|ed)? out\b|\bexercis\w*\b",
              "soccer football basketball baseball tennis golf hockey volleyball swimming running cycling "
              "skiing surfing boxing yoga climbing rugby cricket skating marathon gym hiking"),
    "book": (r"\bbooks?\b|\bnovels?\b|\bread(s|ing)?\b",
             "book books novel read reading author chapter story series memoir library"),
    "art": (r"\bpaint(s|ed|ing|ings)?\b|\bart(s|work|works)?\b|\bdraw(s|n|ing|ings)?\b|\bcreative\b",
            "painting painted paint canvas watercolor acrylic mural sketch drawing drew portrait landscape "
            "sculpture pottery ceramics clay art artwork gallery"),
    "music": (r"\bmusic(al)?\b|\bbands?\b|\bartists?\b|\bsingers?\b|\bconcerts?\b|\bsongs?\b",
              "band concert singer song album music festival show tour live gig musician"),
    "food": (r"\bfoods?\b|\bdish(es)?\b|\bmeals?\b|\bcook(s|ed|ing)?\b|\bbak(e|es|ed|ing)\b|\brecipes?\b",
             "pizza pasta cake cookies bread soup salad curry sushi tacos pie burger dinner lunch baked "
             "cooked recipe"),
    "hobby": (r"\bhobb(y|ies)\b|\bactivit(y|ies)\b|\bfun\b|\bfree time\b|\bdestress\b|\brelax\w*\b",
              "hobby painting reading hiking camping swimming running yoga cooking baking gardening "
              "photography dancing pottery fishing knitting music games"),
    "outdoors": (r"\bcamp(s|ed|ing)?\b|\bhik(e|es|ed|ing)\b|\boutdoors?\b|\bnature\b|\btrips?\b|\btravel\w*\b",
                 "camping camped tent hike hiking trail mountains forest lake beach river park campfire "
                 "woods trip roadtrip"),
    "family": (r"\bfamil(y|ies)\b|\bkids?\b|\bchildren\b|\bchild\b|\brelatives?\b",
               "son daughter kids children husband wife mom dad mother father brother sister baby family "
               "grandma grandpa"),
    "event": (r"\bevents?\b|\bactivis\w*\b|\bparticipat\w*\b|\battend\w*\b|\bcommunity\b|\bvolunteer\w*\b",
              "parade conference festival march rally fundraiser workshop meeting group event volunteer "
              "volunteering charity talk panel"),
    "game": (r"\bgames?\b|\bgaming\b|\bplay(s|ed)? games?\b",
             "game games chess poker cards board video console puzzle tournament"),
    "language": (r"\blanguages?\b",
                 "English Spanish French German Chinese Japanese Italian Portuguese Arabic Korean Russian"),
    "vehicle": (r"\bcars?\b|\bvehicles?\b",
                "car truck bike motorcycle van SUV convertible"),
    "job": (r"\bjobs?\b|\bcareers?\b|\bprofessions?\b|\bwork(s|ed|ing)? as\b",
            "job career work office company boss hired career counselor teacher nurse engineer"),
}

CLASSES: MappingProxyType[str, tuple[re.Pattern[str], str]] = MappingProxyType(
    {name: (re.compile(trigger), instances) for name, (trigger, instances) in _RAW.items()})
"""class name -> (trigger over the lower-cased question, instance words a turn would say)."""


_SET_CUE = re.compile(r"\b(kinds?|types?|sorts?) of\s+\w+")
_SPECIFIC = re.compile(r"[\"“”]|\b(the|this|that|a|an|her|his|my|their) \w+$")


def _asks_for_members(low: str, match: re.Match[str]) -> bool:
    """Whether the class word matched in ``low`` names a set ("instruments", "kinds of art"), not one thing
    ("the book", "a sunrise"): a plural word or a "kind(s) of" before it, and no quoted title."""
    if _SPECIFIC.search(low[:match.start()].rstrip()) and not match.group(0).endswith("s"):
        return False
    if '"' in low or "“" in low:
        return False
    word = match.group(0)
    return word.endswith("s") or _SET_CUE.search(low[max(0, match.start() - 12):match.end()]) is not None


def classes_in(question: str, *, sets_only: bool = False) -> list[tuple[str, str]]:
    """The classes ``question`` names, as ``(class name, instance words)``, in :data:`CLASSES` order.
    ``sets_only``: only where it asks for the class's members (a plural class word or "kind(s) of", no quoted
    title: "What books has Mel read?", not "What book did Mel recommend?").

    >>> [n for n, _ in classes_in("What book did Mel recommend?")], classes_in("What book did Mel recommend?",
    ...                                                                       sets_only=True)
    (['book'], [])
    """
    low = question.lower()
    out = []
    for name, (trigger, instances) in CLASSES.items():
        matches = list(trigger.finditer(low))
        if matches and (not sets_only or any(_asks_for_members(low, m) for m in matches)):
            out.append((name, instances))
    return out
