"""Every recall channel in one table, the implementations that may serve each, and how they are built.

A row of :data:`CHANNELS` (a :class:`ChannelSpec`) says, for one channel: its name (also the name of its built-in
implementation and the prefix of its selection key ``recall.<name>_recaller``), the built-in
:class:`~memory_ext.recall.base.Recaller` class, the capability switch of ``EngineConfig.globals`` that turns it
on, whether it needs the vector index or an embedder with a sparse head, the record kind it is restricted to, and
when a search calls it. The order of the rows is the order in which channels run and are fused.

Configuration picks one implementation per channel by name (``recall.keyword_recaller: keyword``) and hands it
options (``recall.channel_options: {graph: {hop_decay: 0.3}}`` become constructor keyword arguments). Unknown
names and options fail at ``MemoryEngine.open`` with the valid ones (:func:`check_channel_config`).

A custom implementation is registered under a name with :func:`register_recaller` and selected like a built-in:

>>> import numpy as np
>>> from memory_ext import EngineConfig, register_recaller
>>> from memory_ext.recall import Hits, KeywordRecaller
>>> @register_recaller("loud_keyword", channel="keyword")
... class LoudKeyword(KeywordRecaller):
...     def __init__(self, ctx, *, gain: float = 2.0) -> None:
...         super().__init__(ctx)
...         self.gain = gain
...     def recall(self, request):
...         hits = super().recall(request)
...         return Hits(hits.rids, hits.scores * self.gain, fill=0.0)
>>> cfg = EngineConfig.from_dict({"recall": {"keyword_recaller": "loud_keyword",
...                                          "channel_options": {"keyword": {"gain": 3.0}}}})
>>> check_channel_config(cfg.recall)
>>> bad = EngineConfig.from_dict({"recall": {"channel_options": {"graph": {"hops": 3}}}})
>>> check_channel_config(bad.recall)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memory_ext.errors.ConfigError: config field 'recall.channel_options.graph.hops': got 3; ... hop_decay, ...

**Adding a built-in channel:** write its Recaller (a module of this package), add a row to :data:`CHANNELS`, and
add its selection key ``<name>_recaller`` (and, if it has one, its switch) to :mod:`memory_ext.config` — then
regenerate ``docs/configuration.md``. The read pipeline (:mod:`memory_ext.retrieval`) reads everything else from
the row.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigError, InvalidArgumentError
from ..registry import recallers
from .evidence import EvidenceRecaller
from .graph import GraphRecaller
from .keyword import KeywordRecaller
from .layers import KeywordL0Recaller, KeywordL1Recaller, TurnsRecaller, VectorL0Recaller, VectorL1Recaller
from .sparse import SparseRecaller
from .temporal import TemporalRecaller
from .vector import VectorRecaller

if TYPE_CHECKING:
    from ..config import EngineConfig, RecallConfig
    from .base import RecallContext, Recaller

__all__ = ["CHANNELS", "CHANNEL_NAMES", "CHANNEL_SPECS", "ChannelSet", "ChannelSpec", "build_channels",
           "builtin_recallers", "channel_of", "check_channel_config", "implementations", "recaller_options",
           "register_recaller"]

R = TypeVar("R", bound=type)


@dataclass(frozen=True)
class ChannelSpec:
    """One recall channel: what serves it, what turns it on, what it needs and when a search calls it."""

    name: str
    """The channel's name: in ``channel_weights``, ``channel_options``, call names (``keyword@action``) and
    ``RetrievedItem.channels``; also the name of its built-in implementation."""
    recaller: type
    """The built-in implementation (constructed as ``recaller(ctx, **options)``)."""
    switch: str | None = None
    """The ``EngineConfig.globals`` switch that turns the channel on (None: always on)."""
    needs_vectors: bool = False
    """Runs only with the vector index (``globals.vector_enabled`` and an embedder)."""
    needs_sparse: bool = False
    """Runs only with an embedder that has a sparse head (``embed_sparse``)."""
    record_kind: str | None = None
    """Scores only records of this kind (the pipeline passes their rids as ``RecallRequest.allowed``, skips the
    channel when there are none, and counts its evidence only for those records)."""
    needs_time_filter: bool = False
    """Called only for routes with a time filter."""
    conversation_only: bool = False
    """Called only for plans with conversation routes (``opening`` / ``focus``: a conversation excerpt)."""
    matches_only: bool = False
    """A record the channel does not list scores 0: only real matches get a rank in ``RetrievedItem.channels``."""

    @property
    def selection_key(self) -> str:
        """The ``EngineConfig.recall`` key that names the channel's implementation."""
        return f"{self.name}_recaller"

    @property
    def is_layer(self) -> bool:
        """Whether the channel searches an L0/L1 layer (its rank is the layer record's among the layer's)."""
        return self.record_kind in ("l0", "l1")


CHANNELS: tuple[ChannelSpec, ...] = (
    ChannelSpec("keyword", KeywordRecaller, matches_only=True),
    ChannelSpec("vector", VectorRecaller, switch="vector_enabled", needs_vectors=True),
    ChannelSpec("sparse", SparseRecaller, switch="sparse_enabled", needs_sparse=True, conversation_only=True),
    ChannelSpec("graph", GraphRecaller, switch="graph_enabled", matches_only=True),
    ChannelSpec("evidence", EvidenceRecaller, switch="evidence_enabled", matches_only=True),
    ChannelSpec("turns", TurnsRecaller, switch="turns_channel_enabled", record_kind="turn"),
    ChannelSpec("temporal", TemporalRecaller, switch="temporal_enabled", needs_time_filter=True, matches_only=True),
    ChannelSpec("keyword_l0", KeywordL0Recaller, switch="layers_index_enabled", record_kind="l0"),
    ChannelSpec("keyword_l1", KeywordL1Recaller, switch="layers_index_enabled", record_kind="l1"),
    ChannelSpec("vector_l0", VectorL0Recaller, switch="layers_index_enabled", needs_vectors=True, record_kind="l0"),
    ChannelSpec("vector_l1", VectorL1Recaller, switch="layers_index_enabled", needs_vectors=True, record_kind="l1"),
)
"""The built-in channels, in the order they run and are fused."""

CHANNEL_NAMES: tuple[str, ...] = tuple(spec.name for spec in CHANNELS)
CHANNEL_SPECS: Mapping[str, ChannelSpec] = MappingProxyType({spec.name: spec for spec in CHANNELS})
"""The rows of :data:`CHANNELS` by channel name."""
_SPECS = CHANNEL_SPECS
_REGISTERED: dict[str, str] = {}
"""Implementation name -> channel, for implementations added with :func:`register_recaller`."""


def builtin_recallers() -> dict[str, type]:
    """The built-in implementations by name (each is named after its channel)."""
    return {spec.name: spec.recaller for spec in CHANNELS}


def register_recaller(name: str, *, channel: str) -> Callable[[R], R]:
    """Class decorator: register a custom implementation of ``channel`` under ``name``, so that configuration
    can select it (``recall.<channel>_recaller: <name>``). The class is built as ``cls(ctx, **options)`` with the
    engine's :class:`~memory_ext.recall.base.RecallContext` and ``recall.channel_options[channel]``; it answers
    ``recall(request)`` with :class:`~memory_ext.recall.base.Hits` (see the module docstring for an example).

    A name can be registered once (a built-in's name is taken); ``channel`` must be a channel of
    :data:`CHANNELS`. Bad arguments raise :class:`~memory_ext.errors.InvalidArgumentError`.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError("name", name, "give the implementation a non-empty name")
    if channel not in _SPECS:
        raise InvalidArgumentError("channel", channel, "valid channels: " + ", ".join(sorted(CHANNEL_NAMES)))

    def deco(cls: R) -> R:
        if not isinstance(cls, type) or not callable(getattr(cls, "recall", None)):
            raise InvalidArgumentError("recaller", cls, "register a class with a recall(request) method")
        if name in recallers and recallers.resolve("name", name) is not cls:
            raise InvalidArgumentError("name", name, "this name is taken (recaller names: "
                                       + ", ".join(recallers.names()) + "); register under another name")
        recallers.register(name)(cls)
        _REGISTERED[name] = channel
        return cls

    return deco


def channel_of(name: str) -> str | None:
    """The channel the implementation ``name`` serves (None for an unknown name)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in recallers:
        return None
    return getattr(recallers.resolve("recaller", name), "channel", None)


def implementations(channel: str) -> list[str]:
    """The names of the implementations that can serve ``channel``, sorted."""
    return [n for n in recallers.names() if channel_of(n) == channel]


def recaller_options(cls: type) -> tuple[str, ...] | None:
    """The options (keyword arguments after ``ctx``) ``cls`` accepts, sorted; None when it takes any."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return None
    if params and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        params = params[1:]  # the context
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)))


def check_channel_config(recall: RecallConfig) -> None:
    """Raise :class:`~memory_ext.errors.ConfigError` for an unknown implementation name (listing the valid ones
    for the channel), an unknown channel or a bad weight in ``channel_weights``, or an unknown channel or option
    in ``channel_options`` (listing the options the selected implementation takes)."""
    for spec in CHANNELS:
        name = getattr(recall, spec.selection_key)
        valid = implementations(spec.name)
        if name not in valid:
            raise ConfigError.unknown_name(f"recall.{spec.selection_key}", name, valid)
    for channel, weight in recall.channel_weights.items():
        if channel not in _SPECS:
            raise ConfigError.unknown_name(f"recall.channel_weights.{channel}", channel, CHANNEL_NAMES)
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"recall.channel_weights.{channel}", weight, "weights are finite numbers >= 0")
    for channel, options in recall.channel_options.items():
        if channel not in _SPECS:
            raise ConfigError.unknown_name(f"recall.channel_options.{channel}", channel, CHANNEL_NAMES)
        name = getattr(recall, _SPECS[channel].selection_key)
        accepted = recaller_options(recallers.resolve(f"recall.{_SPECS[channel].selection_key}", name))
        if accepted is None:
            continue
        for option, value in options.items():
            if option not in accepted:
                takes = "valid options: " + ", ".join(accepted) if accepted else "it takes no options"
                raise ConfigError(f"recall.channel_options.{channel}.{option}", value,
                                  f"unknown option of the {name!r} recaller of the {channel} channel; {takes}")


@dataclass(frozen=True)
class ChannelSet:
    """The channels an engine built: ``recallers`` in :data:`CHANNELS` order, their rows, and the channels that
    are switched on but cannot run (channel -> why), which a search reports in ``SearchResult.warnings``."""

    recallers: dict[str, Recaller]
    specs: dict[str, ChannelSpec]
    unavailable: dict[str, str] = field(default_factory=dict)
    context: RecallContext | None = None
    """What the channels were built with (a search batches its query encodings through its cache)."""


def build_channels(config: EngineConfig, ctx: RecallContext) -> ChannelSet:
    """Build the channels ``config`` switches on, with their selected implementations and options."""
    built: dict[str, Recaller] = {}
    unavailable: dict[str, str] = {}
    switches = config.globals
    for spec in CHANNELS:
        if spec.switch is not None and not getattr(switches, spec.switch):
            continue
        if spec.needs_vectors and ctx.vector_index is None:
            if switches.vector_enabled:
                unavailable[spec.name] = "no vector index (no embedder)"
            continue
        if spec.needs_sparse and not callable(getattr(ctx.embedder, "embed_sparse", None)):
            unavailable[spec.name] = (f"the embedder {ctx.embedder.id!r} has no sparse head (embed_sparse)"
                                      if ctx.embedder is not None else "no embedder (globals.vector_enabled is off)")
            continue
        cls = recallers.resolve(f"recall.{spec.selection_key}", getattr(config.recall, spec.selection_key))
        options: Mapping[str, Any] = config.recall.channel_options.get(spec.name, {})
        try:
            built[spec.name] = cls(ctx, **dict(options))
        except (TypeError, ValueError) as exc:
            if not options:
                raise
            raise ConfigError(f"recall.channel_options.{spec.name}", dict(options),
                              f"the {spec.name} recaller refused them: {exc}") from None
    return ChannelSet(recallers=built, specs={name: _SPECS[name] for name in built}, unavailable=unavailable,
                      context=ctx)
