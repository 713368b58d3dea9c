"""Bench dataset loaders: LoCoMo and MADial schemas, evidence normalisation, query construction."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_ext.bench.datasets import (
    DatasetError,
    load_locomo,
    load_madial,
    madial_memory_document,
    madial_query,
    normalize_evidence,
    parse_locomo_datetime,
)
from memory_ext.bench.systems import bm25_tokens


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),  # the malformed strings of the public file
        (["D1:03", "D:2:1"], ["D1:3", "D2:1"]),
        (["D1:3, D1:3", "D1:3"], ["D1:3"]),
        (["", "D", "session 1"], []),
        (["D30:05 D4:1"], ["D30:5", "D4:1"]),
    ],
)
def test_normalize_evidence(evidence: list[str], expected: list[str]) -> None:
    assert normalize_evidence(evidence) == expected


def test_normalize_evidence_drops_ids_that_are_not_turns() -> None:
    assert normalize_evidence(["D1:3", "D9:9"], valid_ids={"D1:3"}) == ["D1:3"]


def test_parse_locomo_datetime() -> None:
    assert parse_locomo_datetime("12:19 am on 4 January, 2024") == datetime(2024, 1, 4, 0, 19, tzinfo=UTC)


def _locomo_sample() -> dict:
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Cute!", "blip_caption": "a photo of a cat"},
            ],
            "session_2_date_time": "9:00 am on 9 May, 2023",
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "The cat is called Miso."}],
            "session_3_date_time": "9:00 am on 1 June, 2023",  # listed by date, no turns
        },
        "qa": [
            {"question": "What pet did Ana adopt?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
            {"question": "Cat's name?", "answer": "Miso", "evidence": ["D2:1; D1:1"], "category": 1},
            {"question": "Ben's dog?", "adversarial_answer": "Rex", "evidence": ["D1:2"], "category": 5},
            {"question": "No evidence", "answer": "x", "evidence": ["D7:1"], "category": 2},
        ],
        "observation": {"must": "not be read"},
    }


def test_load_locomo(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([_locomo_sample()]), encoding="utf-8")
    (conv,) = load_locomo(path)
    assert conv.id == "conv-x"
    assert [t.external_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1].text == "Cute! [image: a photo of a cat]"
    assert conv.turns[1].document == "Ben: Cute! [image: a photo of a cat]"
    assert [t.role for t in conv.turns] == ["user", "assistant", "user"]
    assert conv.turns[1].timestamp == datetime(2023, 5, 8, 13, 56, 1, tzinfo=UTC)
    assert conv.now == datetime(2023, 5, 9, 9, 0, tzinfo=UTC)  # the last session that has turns
    assert [(q.category, q.gold) for q in conv.questions] == [("4", ("D1:1",)), ("1", ("D2:1", "D1:1")),
                                                             ("5", ("D1:2",))]
    assert conv.skipped_questions == 1


def test_load_locomo_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        load_locomo(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    sample = _locomo_sample()
    sample["conversation"]["session_1_date_time"] = "May 8th"
    bad.write_text(json.dumps(sample), encoding="utf-8")
    with pytest.raises(DatasetError, match="session_1_date_time"):
        load_locomo(bad)


def test_madial_query_removes_tags_and_stops_before_the_test_turn() -> None:
    lines = ["<BOD>\n", '<Bart>:"我要表演魔术！"\n', ' <Assistant>:"真棒！"\n', '<Bart>:"测试"\n', "<EOD>\n"]
    assert madial_query(lines, [3]) == "我要表演魔术！真棒！"
    assert madial_query(lines, [4, 2]) == "我要表演魔术！"


def test_madial_memory_document() -> None:
    memory = {"time": "2023-12-25", "scene": "活动类", "emotion": "开心", "event": "Bart跳舞。", "user-id": 1}
    assert madial_memory_document(memory) == "2023-12-25 活动类 开心 Bart跳舞。"


def test_load_madial_groups_by_user(tmp_path: Path) -> None:
    memories = [
        {"1": {"time": "2023-01-02", "scene": "活动类", "emotion": "开心", "event": "A跳舞", "user-id": 1, "id": "1"}},
        {"2": {"time": "2023-03-04", "scene": "学习类", "emotion": "难过", "event": "A考试", "user-id": 1, "id": "2"}},
        {"3": {"time": "2023-05-06", "scene": "活动类", "emotion": "开心", "event": "B游泳", "user-id": 2, "id": "3"}},
    ]
    dialogues = [
        {"dialogue": ["<BOD>\n", '<A>:"跳舞"\n', '<Assistant>:"好"\n'], "test-turn": [2], "relevant-id": [1, 3],
         "user-id": 1, "id": 0},
        {"dialogue": ["<BOD>\n", '<B>:"游泳"\n', '<Assistant>:"好"\n'], "test-turn": [2], "relevant-id": [1],
         "user-id": 2, "id": 1},
    ]
    (tmp_path / "memories.jsonl").write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in memories),
                                             encoding="utf-8")
    (tmp_path / "dialogues.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in dialogues),
                                              encoding="utf-8")
    user1, user2 = load_madial(tmp_path)
    assert [t.external_id for t in user1.turns] == ["1", "2"]
    assert user1.turns[1].timestamp == datetime(2023, 3, 4, tzinfo=UTC)
    (question,) = user1.questions
    assert question.text == "跳舞" and question.gold == ("1",)  # memory 3 belongs to user 2
    assert question.category == "1"
    assert user2.questions == [] and user2.skipped_questions == 1  # its only gold is another user's


def test_bm25_tokens_latin_words_and_cjk_ngrams() -> None:
    assert bm25_tokens("When did Caroline go to the LGBTQ support group?") == [
        "caroline", "go", "lgbtq", "support", "group"]
    assert bm25_tokens("我去杭州") == ["我", "去", "杭", "州", "我去", "去杭", "杭州"]
