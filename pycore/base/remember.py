"""Remembering results across estimates by the part of their inputs they read.

``functools.lru_cache`` keys on every argument; the pools that do not depend on the batch or the sequence
(model states, activations per token) take the whole Setup but read only part of it, so they are keyed by
that part, and the answers' searches, which change only the batch, the sequence or the layout, find them.
"""

from functools import wraps
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")


def remembered(key: "Callable[..., tuple[Hashable, ...]]", size: int = 256) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: results remembered under ``key(*args)``, forgotten all at once past ``size`` of them.
    The result is shared: read it, do not change it. ``.cache_clear()`` forgets them, as lru_cache's does."""
    def wrap(compute: Callable[..., T]) -> Callable[..., T]:
        store: "dict[tuple[Hashable, ...], T]" = {}

        @wraps(compute)
        def call(*args: object) -> T:
            k = key(*args)
            found = store.get(k)
            if found is None:
                if len(store) >= size:
                    store.clear()
                found = store[k] = compute(*args)
            return found
        call.cache_clear = store.clear          # type: ignore[attr-defined]
        return call
    return wrap
