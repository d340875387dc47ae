"""A registry of named plugins (input types, workloads): one decorator to add one, a clear error for a name
that is unknown or taken, and the problem a config check reports for a value outside its choices."""

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def choice(what: str, value: object, allowed) -> list[str]:
    """A problem if `value` is not one of `allowed`, naming them."""
    if value in allowed:
        return []
    return [f"{what}={value!r} is not one of: {', '.join(str(a) for a in allowed)}"]


class Registry(dict[str, T]):
    """name -> the registered class. `@registry.register("name")` adds one; a second class under a name
    already taken is refused, naming both."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[T], T]:
        def add(cls: T) -> T:
            if name in self:
                raise ValueError(
                    f"{self.kind} {name!r} is already registered (by {self[name].__qualname__}); "
                    f"{cls.__qualname__} needs a name of its own"
                )
            self[name] = cls
            return cls

        return add

    def __missing__(self, name: str) -> T:
        raise ValueError(f"unknown {self.kind} {name!r}; registered: {', '.join(sorted(self))}")
