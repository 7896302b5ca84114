"""Searches made of steps: a generator that yields before each estimate it makes and returns its answer.

The page runs the answers' searches a few steps at a time while a person types (site/main.py), so a
keystroke never waits for a whole search; everything else runs them to the end with ``finish``.
"""

from typing import Generator, TypeVar

T = TypeVar("T")
Steps = Generator[None, None, T]


def finish(steps: "Steps[T]") -> T:
    """Run a generator of steps to its end; its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value      # a generator's return value rides on StopIteration, typed Any
            return result
