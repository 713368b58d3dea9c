"""CI-sized smoke run of ``memext bench``: one tiny conversation, a few questions, the hashing embedder.

The data is written here (never copied from the evaluation sets). Runs offline in a few seconds.
"""

from __future__ import annotations

import importlib.util
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from memory_ext.bench import SYSTEMS, System
from memory_ext.bench.cli import main

_TURNS = [
    ("Ana", "Hi Ben! I finally adopted a cat from the shelter yesterday."),
    ("Ben", "No way! What's the cat called?"),
    ("Ana", "Her name is Miso, she is a grey tabby with one white paw."),
    ("Ben", "That is adorable. I have been training for the Lisbon half marathon."),
    ("Ana", "Wow, when is the race?"),
    ("Ben", "It is in October, I run four times a week now."),
    ("Ana", "I started pottery classes at the community center too."),
    ("Ben", "Pottery sounds relaxing. What did you make?"),
    ("Ana", "A wobbly blue bowl, my teacher said it was a good start."),
    ("Ben", "Ha! Send me a photo."),
]
_TURNS_2 = [
    ("Ben", "I finished the Lisbon half marathon in 1 hour 52 minutes!"),
    ("Ana", "Congratulations! Did your knee hold up?"),
    ("Ben", "It hurt a bit after kilometre 15, but I iced it afterwards."),
    ("Ana", "Miso knocked my blue bowl off the shelf and it broke."),
    ("Ben", "Oh no, the bowl from your pottery class?"),
    ("Ana", "Yes, but I am making a new vase now, a green one."),
    ("Ben", "My sister Clara is visiting from Toronto next week."),
    ("Ana", "You should take her to the night market."),
    ("Ben", "Good idea, she loves dumplings."),
    ("Ana", "Then the dumpling stall near the bridge is perfect."),
]


def _locomo_file(tmp_path: Path) -> Path:
    def session(number: int, turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
        return [{"speaker": s, "dia_id": f"D{number}:{i}", "text": t} for i, (s, t) in enumerate(turns, 1)]

    conversation = {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "10:00 am on 3 June, 2023", "session_1": session(1, _TURNS),
        "session_2_date_time": "7:30 pm on 20 October, 2023", "session_2": session(2, _TURNS_2),
        "session_3_date_time": "8:00 pm on 1 November, 2023",
    }
    qa = [
        {"question": "What is the name of Ana's cat?", "answer": "Miso", "evidence": ["D1:3"], "category": 4},
        {"question": "When did Ana adopt her cat?", "answer": "2 June 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What happened to the bowl Ana made in pottery class?", "answer": "Miso broke it",
         "evidence": ["D1:9; D2:4"], "category": 1},
        {"question": "How long did Ben take to run the Lisbon half marathon?", "answer": "1h52",
         "evidence": ["D2:1"], "category": 4},
        {"question": "What food does Clara like?", "answer": "dumplings", "evidence": ["D2:9"], "category": 3},
        {"question": "What did Ana's sister bring from Toronto?", "adversarial_answer": "maple syrup",
         "evidence": ["D2:7"], "category": 5},
        {"question": "Unanswerable", "answer": "-", "evidence": [], "category": 2},
    ]
    path = tmp_path / "locomo_tiny.json"
    path.write_text(json.dumps([{"sample_id": "conv-tiny", "conversation": conversation, "qa": qa}]),
                    encoding="utf-8")
    return path


def _madial_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "madial"
    folder.mkdir()
    memories = {
        "1": ("2023-12-25", "活动类", "开心", "小明在圣诞节晚会上跳舞，感觉非常开心。", 1),
        "2": ("2023-03-07", "活动类", "开心", "小明在运动会上获得一百米第一名。", 1),
        "3": ("2023-05-15", "喜好类", "开心", "小明尝试了芒果口味的冰淇淋。", 1),
        "4": ("2023-06-01", "学习类", "难过", "小明数学考试没考好，很难过。", 1),
        "5": ("2023-02-10", "活动类", "开心", "小红第一次去海边游泳。", 2),
        "6": ("2023-08-08", "喜好类", "开心", "小红喜欢画小猫。", 2),
    }
    with (folder / "memories.jsonl").open("w", encoding="utf-8") as handle:
        for mid, (time, scene, emotion, event, user) in memories.items():
            row = {mid: {"time": time, "scene": scene, "emotion": emotion, "event": event, "user-id": user,
                         "id": mid}}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    dialogues = [
        {"dialogue": ["<BOD>\n", '<小明>:"元旦晚会我要跳舞！"\n', '<Assistant>:"太棒了！"\n', '<小明>:"嗯"\n',
                      "<EOD>\n"],
         "test-turn": [3], "relevant-id": [1], "user-id": 1, "id": 0},
        {"dialogue": ["<BOD>\n", '<小明>:"今天又吃冰淇淋了"\n', '<Assistant>:"什么口味？"\n', '<小明>:"芒果"\n'],
         "test-turn": [3], "relevant-id": [3], "user-id": 1, "id": 1},
        {"dialogue": ["<BOD>\n", '<小红>:"我又画了一只小猫"\n', '<Assistant>:"好可爱"\n'],
         "test-turn": [2], "relevant-id": [6, 5], "user-id": 2, "id": 2},
    ]
    with (folder / "dialogues.jsonl").open("w", encoding="utf-8") as handle:
        for row in dialogues:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return folder


def _engine_available() -> bool:
    try:
        from memory_ext import MemoryEngine  # noqa: F401
    except ImportError:
        return False
    return True


SMOKE_SYSTEMS = "bm25,vector,memory-ext"


def _check_result(result: dict[str, Any], dataset: str, micro_keys: set[str], categories: set[str]) -> None:
    assert result["dataset"] == dataset
    assert set(result["n_questions"]) == categories
    expected = {"bm25", "vector"} | ({"memory-ext"} if _engine_available() else set())
    assert set(result["systems"]) == expected, result.get("skipped")
    for name, entry in result["systems"].items():
        assert set(entry) >= {"micro", "per_category", "latency_ms", "ingest_turns_per_s", "peak_rss_mb"}, name
        assert set(entry["micro"]) == micro_keys
        for scores in (entry["micro"], *entry["per_category"].values()):
            assert all(0.0 <= v <= 1.0 for v in scores.values()), (name, scores)
        assert set(entry["latency_ms"]) == {"search_p50", "search_p95"}
        assert 0.0 <= entry["latency_ms"]["search_p50"] <= entry["latency_ms"]["search_p95"]
        assert entry["ingest_turns_per_s"] > 0 and entry["peak_rss_mb"] > 0


def test_bench_locomo_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _locomo_file(tmp_path)
    out, report = tmp_path / "locomo.json", tmp_path / "report"
    status = main(["locomo", "--data", str(data), "--systems", SMOKE_SYSTEMS, "--embedder", "hashing",
                   "--json", str(out), "--report", str(report), "--no-progress",
                   "--rankings", str(tmp_path / "rankings.jsonl")])
    assert status == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    ks = (1, 5, 10, 20)
    micro = {f"{m}@{k}" for m in ("evid_recall", "recall_any", "recall_all") for k in ks} | {"ndcg@10", "mrr"}
    _check_result(result, "locomo", micro, {"1", "2", "3", "4", "5"})
    assert result["n_questions"] == {"1": 1, "2": 1, "3": 1, "4": 2, "5": 1}
    assert result["meta"]["skipped_questions_empty_evidence"] == 1
    # bm25 finds the turn that names the cat
    assert result["systems"]["bm25"]["per_category"]["4"]["evid_recall@5"] == 1.0
    assert "| bm25 |" in capsys.readouterr().out
    assert (report / "report.md").is_file() and (report / "results.json").is_file()
    if importlib.util.find_spec("matplotlib") is not None:
        assert (report / "recall_at_k.png").stat().st_size > 0
        assert (report / "per_category.png").stat().st_size > 0
    rows = [json.loads(line) for line in (tmp_path / "rankings.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 6 * len(result["systems"])
    assert all(len(r["ranking"]) <= 20 and len(set(r["ranking"])) == len(r["ranking"]) for r in rows)


def test_bench_madial_smoke(tmp_path: Path) -> None:
    out = tmp_path / "madial.json"
    status = main(["madial", "--data", str(_madial_folder(tmp_path)), "--systems", SMOKE_SYSTEMS,
                   "--embedder", "hashing", "--json", str(out), "--no-progress", "--quiet"])
    assert status == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    micro = {"recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "mrr"}
    _check_result(result, "madial", micro, {"1", "2"})
    assert result["n_questions"] == {"1": 2, "2": 1}
    # two memories per user 2: anything ranks both in the top 5
    assert result["systems"]["bm25"]["per_category"]["2"]["recall@5"] == 1.0


class _Broken(System):
    name = "broken"

    def ingest(self, conversation_id: str, turns: Any, now: Any = None) -> None:
        raise RuntimeError("disk on fire")

    def query(self, text: str, k: int) -> list[str]:
        return []


def test_a_failing_system_is_reported_not_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(SYSTEMS, "broken", _Broken)
    out = tmp_path / "r.json"
    status = main(["locomo", "--data", str(_locomo_file(tmp_path)), "--systems", "bm25,broken",
                   "--embedder", "hashing", "--json", str(out), "--no-progress", "--quiet"])
    assert status == 1
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["systems"]) == {"bm25"}
    assert "disk on fire" in result["skipped"]["broken"]
    assert "disk on fire" in capsys.readouterr().err


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["locomo", "--data", str(tmp_path / "nope.json"), "--systems", "bm25", "--no-progress"]) == 2
    assert "no such file" in capsys.readouterr().err
    data = _locomo_file(tmp_path)
    assert main(["locomo", "--data", str(data), "--systems", "bm25,vectr", "--no-progress"]) == 2
    assert "valid systems" in capsys.readouterr().err


def test_limits_select_conversations_and_questions(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["locomo", "--data", str(_locomo_file(tmp_path)), "--systems", "bm25", "--limit-questions", "2",
                 "--json", str(out), "--no-progress", "--quiet", "--embedder", "hashing"]) == 0
    assert sum(json.loads(out.read_text(encoding="utf-8"))["n_questions"].values()) == 2


@pytest.mark.slow
def test_framework_baselines_smoke(tmp_path: Path) -> None:
    pytest.importorskip("langchain_classic")
    pytest.importorskip("llama_index.retrievers.bm25")
    out = tmp_path / "r.json"
    assert main(["locomo", "--data", str(_locomo_file(tmp_path)), "--systems", "langchain-ensemble,llamaindex-fusion",
                 "--embedder", "hashing", "--json", str(out), "--no-progress", "--quiet"]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["systems"]) == {"langchain-ensemble", "llamaindex-fusion"}, result["skipped"]
    for entry in result["systems"].values():
        assert all(0.0 <= v <= 1.0 for v in entry["micro"].values())


def test_bench_scale_smoke(tmp_path: Path) -> None:
    if not _engine_available():
        pytest.skip("the memory-ext engine is not importable")
    out, report = tmp_path / "scale.json", tmp_path / "report"
    status = main(["scale", "--sizes", "120,240", "--backend", "numpy", "--embedder", "hashing", "--namespaces", "3",
                   "--queries", "10", "--batch", "50", "--in-process", "--json", str(out), "--report", str(report),
                   "--no-progress", "--quiet"])
    assert status == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["dataset"] == "scale" and result["skipped"] == {}
    per_size = result["systems"]["numpy"]["per_size"]
    assert set(per_size) == {"120", "240"}
    for entry in per_size.values():
        assert entry["ingest_turns_per_s"] > 0 and entry["disk_mb"] > 0 and entry["peak_rss_mb"] > 0
        assert 0 < entry["latency_ms"]["search_p50"] <= entry["latency_ms"]["search_p95"]
    assert (report / "report.md").is_file()


def test_synthetic_corpus_is_seeded_and_mixed() -> None:
    from memory_ext.bench.scale import SyntheticCorpus

    turns = list(SyntheticCorpus(seed=3, namespaces=3).turns(300))
    assert turns == list(SyntheticCorpus(seed=3, namespaces=3).turns(300))
    assert {ns for ns, _ in turns} == {"user-000", "user-001", "user-002"}
    texts = [t["content"] for _, t in turns]
    chinese = sum(any("\u4e00" <= ch <= "\u9fff" for ch in text) for text in texts)
    assert 0.15 < chinese / len(texts) < 0.6
    assert len({t["external_id"] for _, t in turns}) == 300
    assert all(a["timestamp"] < b["timestamp"] for (_, a), (_, b) in pairwise(turns))


def test_the_recorded_command_is_the_one_given_to_main(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json as _json

    from memory_ext.cli import main as memext_main

    conv = [{"sample_id": "c1", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle called Toby."},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely, how old is Toby?"}]},
        "qa": [{"question": "What dog did Ann adopt?", "answer": "a beagle", "evidence": ["D1:1"], "category": 4}]}]
    data = tmp_path / "c.json"
    data.write_text(_json.dumps(conv))
    out = tmp_path / "r.json"
    code = memext_main(["bench", "locomo", "--data", str(data), "--systems", "bm25", "--embedder", "hashing",
                        "--json", str(out), "--no-progress", "--quiet"])
    assert code == 0
    assert _json.loads(out.read_text())["meta"]["command"].startswith("memext bench locomo --data ")


def test_interleaved_run_scores_like_one_system_after_the_other(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    data = _locomo_file(tmp_path)
    monkeypatch.setitem(SYSTEMS, "broken", _Broken)
    rows: dict[str, list[dict[str, Any]]] = {}
    for mode in ("sequential", "interleaved"):
        out = tmp_path / f"{mode}.json"
        status = main(["locomo", "--data", str(data), "--systems", SMOKE_SYSTEMS + ",broken", "--embedder", "hashing",
                       "--json", str(out), "--no-progress", "--quiet", "--rankings", str(tmp_path / f"{mode}.jsonl"),
                       *(["--interleave"] if mode == "interleaved" else [])])
        assert status == 1  # the broken system is reported; the others ran to the end
        result = json.loads(out.read_text(encoding="utf-8"))
        assert "disk on fire" in result["skipped"]["broken"]
        _check_result(result, "locomo", set(result["systems"]["bm25"]["micro"]), {"1", "2", "3", "4", "5"})
        assert result["meta"].get("interleaved", False) is (mode == "interleaved")
        rows[mode] = sorted(({k: r[k] for k in ("system", "qid", "ranking", "metrics")}
                             for r in map(json.loads, (tmp_path / f"{mode}.jsonl").read_text("utf-8").splitlines())),
                            key=lambda r: (r["system"], r["qid"]))
    assert rows["sequential"] == rows["interleaved"]


def test_bench_ingest_reports_peak_rss_and_searches_during_a_bulk_ingest(tmp_path: Path) -> None:
    path = _locomo_file(tmp_path)
    [conv] = json.loads(path.read_text(encoding="utf-8"))
    two = tmp_path / "locomo_two.json"
    two.write_text(json.dumps([conv, {**conv, "sample_id": "conv-tiny-2"}]), encoding="utf-8")
    out = tmp_path / "ingest.json"
    assert main(["ingest", "--data", str(two), "--systems", "memory-ext,vector", "--embedder", "hashing",
                 "--messages", "2", "--batch", "2", "--batches", "1", "--queries", "2", "--during-queries", "3",
                 "--json", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert all(entry["peak_rss_mb"] > 0 for entry in result["systems"].values())
    during = result["searches_during_ingest"]
    assert during["idle_ms"]["n"] == 2 * 3 and during["bulk_turns"] == len(conv["conversation"]["session_1"]) + \
        len(conv["conversation"]["session_2"])
    assert during["ratio_p95"] > 0 and len(during["searches_per_round"]) == 2
