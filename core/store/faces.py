"""Faces with tables of their own, and how ``forget`` reaches them.

A *face* (an adapter such as the LangGraph ``MemoryStore``) may keep data beside the truth store, in the store
directory (``langgraph_store.sqlite3``). "Forget removes from every store" includes those tables, so a face
registers with the engine (:meth:`memory_ext.MemoryEngine.register_face`):

* in this process, the face object itself is called by every ``forget``;
* its ``hook`` — ``"package.module:function"``, a function ``(directory, namespace, turn_ids) -> rows removed`` —
  is recorded in the truth store, so a process that never opens the face (``memext forget``, another service)
  still forgets its rows. A recorded hook that cannot be imported is listed in the receipt's ``pending_purge``
  (``face:<name>``), never skipped silently.

``turn_ids`` is None when a whole namespace (or session) is forgotten, else the forgotten turns' ids.

>>> class Notes:
...     name, hook = "notes", None
...     def forget(self, namespace, turn_ids):
...         return 0
>>> isinstance(Notes(), Face)
True
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .statements import sql_of

if TYPE_CHECKING:
    from ..models import Namespace
    from .interface import TruthStore

__all__ = ["FACES_META", "Face", "forget_in_faces", "record_face"]

FACES_META = "faces"
"""Meta key of the truth store: JSON ``{face name: "module:function"}``."""


@runtime_checkable
class Face(Protocol):
    """A face with its own tables: ``forget`` removes a namespace's (or some turns') rows from them."""

    name: str
    hook: str | None
    """``"module:function"`` called with ``(directory, namespace, turn_ids)`` when the face is not open."""

    def forget(self, namespace: Namespace, turn_ids: Sequence[str] | None) -> int:
        """Remove the namespace's rows (only those of ``turn_ids`` when given); returns how many went."""


def recorded_faces(store: TruthStore) -> dict[str, str]:
    raw = store.get_meta(FACES_META)
    return dict(json.loads(raw)) if raw else {}


def record_face(store: TruthStore, name: str, hook: str | None) -> None:
    """Remember a face's hook in the truth store (no-op when read-only or already recorded)."""
    if hook is None or store.read_only or recorded_faces(store).get(name) == hook:
        return
    with store.transaction("register face") as conn:
        row = conn.execute(sql_of(conn).meta.get_meta, (FACES_META,)).fetchone()
        faces = dict(json.loads(row[0])) if row else {}
        faces[name] = hook
        store.set_meta(conn, FACES_META, json.dumps(faces, sort_keys=True))


def _import(hook: str) -> Any:
    module, _, function = hook.partition(":")
    return getattr(importlib.import_module(module), function)


def forget_in_faces(store: TruthStore, live: Mapping[str, Face], namespace: Namespace,
                    turn_ids: Sequence[str] | None) -> tuple[dict[str, int], list[str]]:
    """Forget in every face (open ones directly, recorded ones through their hook).

    Returns ``({face name: rows removed}, [faces that could not be reached])``.
    """
    removed: dict[str, int] = {}
    unreachable: list[str] = []
    faces = recorded_faces(store)
    for name in sorted(set(faces) | set(live)):
        if name in live:
            removed[name] = int(live[name].forget(namespace, turn_ids))
            continue
        try:
            removed[name] = int(_import(faces[name])(Path(store.directory), namespace, turn_ids))
        except ImportError:
            unreachable.append(name)
    return removed, unreachable
