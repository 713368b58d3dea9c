"""Benchmark datasets in their public schemas: LoCoMo (English) and MADial-Bench (Chinese).

Both load into the same shape, a list of :class:`Conversation`: the turns one system ingests into one store
(one namespace), and the questions asked of that store, each with its gold turn ids and a category. The loaders
follow ``BENCHMARKS.md`` exactly:

- **LoCoMo** (``locomo10.json`` schema): one conversation per sample; turn text is ``text`` plus
  `` [image: <blip_caption>]`` when present; timestamp = the session's date-time plus one second per turn;
  evidence normalised by :func:`normalize_evidence`. The GPT-generated ``observation``, ``session_summary``
  and ``event_summary`` fields are never read.
- **MADial-Bench** (``memories.jsonl`` + ``dialogues.jsonl``): one "conversation" per ``user-id``, whose turns
  are that user's memories (document = time + scene + emotion + event) and whose questions are that user's
  dialogues (query = the lines before the first ``test-turn``, speaker tags removed; gold = ``relevant-id``;
  category = the user id).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = [
    "LOCOMO_CATEGORIES",
    "LOCOMO_HEADLINE_CATEGORIES",
    "BenchQuestion",
    "BenchTurn",
    "Conversation",
    "DatasetError",
    "load_locomo",
    "load_madial",
    "madial_memory_document",
    "madial_query",
    "normalize_evidence",
    "parse_locomo_datetime",
]

LOCOMO_CATEGORIES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
"""LoCoMo's numeric ``category`` field (not the paper's order)."""

LOCOMO_HEADLINE_CATEGORIES: tuple[str, ...] = ("1", "2", "3", "4")
"""Categories averaged into the headline (micro) numbers; category 5 is reported separately."""

LOCOMO_DATETIME_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_ID = re.compile(r"D:?(\d+):0*(\d+)")
_MADIAL_TAG = re.compile(r"<[^<>\n]{1,40}>\s*:?")


class DatasetError(ValueError):
    """A benchmark file that does not follow its public schema; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class BenchTurn:
    """One unit a system ingests: a conversation turn (LoCoMo) or a memory (MADial)."""

    external_id: str
    """The dataset's id for it (LoCoMo ``dia_id`` such as ``D1:3``; MADial memory id)."""
    text: str
    speaker: str | None = None
    role: str = "user"
    timestamp: datetime | None = None
    session_id: str | None = None

    @property
    def document(self) -> str:
        """The text baselines index: ``speaker: text`` when there is a speaker, else the text."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


@dataclass(frozen=True, slots=True)
class BenchQuestion:
    """One query with its gold turn ids (already normalised; never empty)."""

    qid: str
    text: str
    gold: tuple[str, ...]
    category: str


@dataclass(slots=True)
class Conversation:
    """What one store holds and what it is asked."""

    id: str
    turns: list[BenchTurn]
    questions: list[BenchQuestion]
    now: datetime | None = None
    """The conversation's "now" (LoCoMo: the last session's date-time)."""
    skipped_questions: int = 0
    """Questions dropped because their evidence was empty after normalisation."""
    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------- LoCoMo


def parse_locomo_datetime(value: str) -> datetime:
    """Parse a LoCoMo session date-time such as ``"1:56 pm on 8 May, 2023"`` (taken as UTC).

    >>> parse_locomo_datetime("1:56 pm on 8 May, 2023").isoformat()
    '2023-05-08T13:56:00+00:00'
    """
    return datetime.strptime(value.strip(), LOCOMO_DATETIME_FORMAT).replace(tzinfo=UTC)


def normalize_evidence(evidence: Iterable[Any], valid_ids: Iterable[str] | None = None) -> list[str]:
    """Normalise LoCoMo evidence strings to ``D<s>:<t>`` turn ids (BENCHMARKS.md).

    Each string is split on ``[;,\\s]+``; each piece matching ``D:?(\\d+):0*(\\d+)`` is rebuilt as ``D<s>:<t>``;
    ids not in ``valid_ids`` (when given) are dropped; order is kept and repeats are removed.

    >>> normalize_evidence(["D8:6; D9:17", "D:1:03", "D1:3", "junk"])
    ['D8:6', 'D9:17', 'D1:3']
    >>> normalize_evidence(["D1:3", "D99:1"], valid_ids={"D1:3"})
    ['D1:3']
    """
    valid = None if valid_ids is None else set(valid_ids)
    out: list[str] = []
    for raw in evidence:
        for piece in _EVIDENCE_SPLIT.split(str(raw)):
            match = _EVIDENCE_ID.fullmatch(piece.strip())
            if match is None:
                continue
            turn_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if (valid is None or turn_id in valid) and turn_id not in out:
                out.append(turn_id)
    return out


def _locomo_turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {caption}]"
    return text


def _locomo_conversation(sample: dict[str, Any], index: int, source: str) -> Conversation:
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise DatasetError(f"{source}: conversation #{index} has no 'conversation' object")
    conv_id = str(sample.get("sample_id") or f"conv-{index}")
    speaker_a = conv.get("speaker_a")
    sessions = sorted(
        (int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conv[key], list)
    )
    turns: list[BenchTurn] = []
    now: datetime | None = None
    for number, key in sessions:
        date_key = f"{key}_date_time"
        if date_key not in conv:
            raise DatasetError(f"{source}: {conv_id} has {key} but no {date_key}")
        try:
            start = parse_locomo_datetime(str(conv[date_key]))
        except ValueError:
            raise DatasetError(
                f"{source}: {conv_id}.{date_key} = {conv[date_key]!r} is not in the format "
                f"{LOCOMO_DATETIME_FORMAT!r}"
            ) from None
        if conv[key]:
            now = start
        for position, turn in enumerate(conv[key]):
            dia_id = turn.get("dia_id")
            if not dia_id:
                raise DatasetError(f"{source}: {conv_id}.{key}[{position}] has no dia_id")
            speaker = turn.get("speaker")
            turns.append(BenchTurn(
                external_id=str(dia_id),
                text=_locomo_turn_text(turn),
                speaker=speaker,
                role="user" if speaker_a is None or speaker == speaker_a else "assistant",
                timestamp=start + timedelta(seconds=position),
                session_id=f"{conv_id}-s{number}",
            ))
    valid = {t.external_id for t in turns}
    questions: list[BenchQuestion] = []
    skipped = 0
    for qi, qa in enumerate(sample.get("qa") or []):
        gold = normalize_evidence(qa.get("evidence") or [], valid)
        if not gold:
            skipped += 1
            continue
        questions.append(BenchQuestion(
            qid=f"{conv_id}#{qi}", text=str(qa["question"]), gold=tuple(gold), category=str(qa.get("category"))
        ))
    return Conversation(id=conv_id, turns=turns, questions=questions, now=now, skipped_questions=skipped,
                        meta={"speaker_a": speaker_a, "speaker_b": conv.get("speaker_b")})


def load_locomo(path: str | Path) -> list[Conversation]:
    """Load a LoCoMo file (a JSON list of conversations in the ``locomo10.json`` schema, or one conversation)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file (give a JSON file in the locomo10.json schema)") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of conversations, got {type(data).__name__}")
    return [_locomo_conversation(sample, i, str(path)) for i, sample in enumerate(data)]


# --------------------------------------------------------------------------------------------------- MADial


def madial_memory_document(memory: dict[str, Any]) -> str:
    """The document of one MADial memory: time + scene + emotion + event, space-separated.

    >>> madial_memory_document({"time": "2023-12-25", "scene": "活动类", "emotion": "开心", "event": "Bart跳舞。"})
    '2023-12-25 活动类 开心 Bart跳舞。'
    """
    return " ".join(str(memory.get(key) or "").strip() for key in ("time", "scene", "emotion", "event")).strip()


def madial_query(lines: Sequence[str], test_turns: Sequence[int]) -> str:
    """The query of one MADial dialogue: the lines before the first test turn, speaker tags removed.

    Tags are ``<Name>:``, ``<Assistant>:``, ``<BOD>`` and ``<EOD>``; the quotes around each utterance go too,
    and the utterances are concatenated (a space only between latin characters). This reproduces BENCHMARKS.md's e5
    reference (dev Recall@5 0.336) and its character-n-gram BM25 reference (0.312).

    >>> madial_query(["<BOD>\\n", '<Bart>:"嘿！"\\n', ' <Assistant>:"你好"\\n', '<Bart>:"test"\\n'], [3])
    '嘿！你好'
    >>> madial_query(['<Bart>:"I won"\\n', '<Assistant>:"Great!"\\n', '<Bart>:"?"\\n'], [2])
    'I won Great!'
    """
    first = min(test_turns) if test_turns else len(lines)
    kept = [_MADIAL_TAG.sub("", line).strip().strip('"\u201c\u201d').strip() for line in lines[:first]]
    out = ""
    for utterance in (u for u in kept if u):
        # A space only where latin text meets: English utterances must not glue words together.
        out += " " + utterance if out and (out[-1].isascii() or utterance[0].isascii()) else utterance
    return out


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file (a MADial folder holds memories.jsonl and dialogues.jsonl)") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not valid JSON ({exc})") from None
    return rows


def _parse_date(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(str(value).strip())
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def load_madial(folder: str | Path) -> list[Conversation]:
    """Load a MADial-Bench folder (``memories.jsonl``, ``dialogues.jsonl``): one conversation per user id."""
    folder = Path(folder)
    memories: dict[str, dict[str, Any]] = {}
    for row in _read_jsonl(folder / "memories.jsonl"):
        for key, memory in row.items():
            if not isinstance(memory, dict) or "user-id" not in memory:
                raise DatasetError(f"{folder / 'memories.jsonl'}: memory {key!r} has no 'user-id'")
            memories[str(memory.get("id", key))] = memory
    by_user: dict[str, Conversation] = {}
    for mem_id, memory in memories.items():
        user = str(memory["user-id"])
        conv = by_user.setdefault(user, Conversation(id=f"user-{user}", turns=[], questions=[]))
        conv.turns.append(BenchTurn(external_id=mem_id, text=madial_memory_document(memory), speaker=None,
                                    role="user", timestamp=_parse_date(memory.get("time")), session_id=None))
    for row in _read_jsonl(folder / "dialogues.jsonl"):
        for needed in ("dialogue", "test-turn", "relevant-id", "user-id"):
            if needed not in row:
                raise DatasetError(f"{folder / 'dialogues.jsonl'}: dialogue {row.get('id')!r} has no {needed!r}")
        user = str(row["user-id"])
        conv = by_user.setdefault(user, Conversation(id=f"user-{user}", turns=[], questions=[]))
        own = {t.external_id for t in conv.turns}
        gold = tuple(dict.fromkeys(str(r) for r in row["relevant-id"] if str(r) in own))
        if not gold:
            conv.skipped_questions += 1
            continue
        conv.questions.append(BenchQuestion(qid=f"dialogue-{row.get('id')}",
                                            text=madial_query(row["dialogue"], row["test-turn"]),
                                            gold=gold, category=user))
    for conv in by_user.values():
        dated = [t.timestamp for t in conv.turns if t.timestamp is not None]
        conv.now = max(dated) if dated else None
    return [by_user[user] for user in sorted(by_user, key=lambda u: (len(u), u))]
