"""``Choice``: a value drawn from one of several specs, or one of several fixed non-tensor values."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack

from rl_envs.specs._base import ShapeLike, TensorSpec

__all__ = ["Choice"]


class Choice(TensorSpec):
    """A spec whose values come from one of ``choices``, picked uniformly at random.

    ``choices`` are all specs (of one type, shape, dtype and device; ``rand``
    draws from a random one, ``is_in`` accepts what any of them accepts) or all
    ``NonTensorData`` / ``NonTensorStack`` (``rand`` returns one of them,
    ``is_in`` compares by equality).

    Args:
        choices: a non-empty list of specs or of non-tensor data.

    Raises:
        TypeError: ``choices`` is not a list, or mixes kinds.
        ValueError: the choices differ in shape, dtype or device.

    Example:
        >>> import torch
        >>> from rl_envs.specs import Bounded
        >>> spec = Choice([Bounded(0.0, 1.0, shape=(1,)), Bounded(10.0, 11.0, shape=(1,))])
        >>> value = spec.rand()
        >>> bool(value < 1) or bool(value >= 10), spec.is_in(torch.tensor([5.0]))
        (True, False)
    """

    def __init__(self, choices: list[Any]) -> None:
        if not isinstance(choices, list) or not choices:
            raise TypeError(
                f"Choice takes a non-empty list of choices, got {type(choices).__name__}."
            )
        first = choices[0]
        if not isinstance(first, (TensorSpec, NonTensorData, NonTensorStack)):
            raise TypeError(
                "Each choice must be a TensorSpec, NonTensorData or NonTensorStack, got "
                f"{type(first).__name__}."
            )
        for c in choices[1:]:
            if not isinstance(c, type(first)):
                raise TypeError(
                    f"All choices must be of one type: got {type(first).__name__} and "
                    f"{type(c).__name__}."
                )
            for attr in ("shape", "dtype", "device"):
                if getattr(c, attr) != getattr(first, attr):
                    raise ValueError(
                        f"All choices must have the same {attr}: got {getattr(first, attr)} and "
                        f"{getattr(c, attr)}."
                    )
        super().__init__(first.shape, first.device, first.dtype)
        self._choices = [c.clone() for c in choices]

    def cardinality(self) -> int:
        """The number of non-tensor choices, or the sum of the spec choices' cardinalities."""
        if not isinstance(self._choices[0], TensorSpec):
            return len(self._choices)
        return int(sum(int(c.cardinality()) for c in self._choices))

    @property
    def num_choices(self) -> int:
        """The number of choices."""
        return len(self._choices)

    def _pick(self, idx: int, method: str, shape: ShapeLike | None) -> Any:
        choice = self._choices[idx]
        if isinstance(choice, TensorSpec):
            return getattr(choice, method)(shape)
        return choice

    def rand(self, shape: ShapeLike | None = None) -> Any:
        """A value of a choice picked uniformly (the same choice for the whole batch)."""
        idx = int(torch.randint(0, len(self._choices), ()).item())
        return self._pick(idx, "rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> Any:
        """The zero of the first choice (or the first non-tensor value)."""
        return self._pick(0, "zero", shape)

    def one(self, shape: ShapeLike | None = None) -> Any:
        """The ones of the second choice (the first when there is only one)."""
        return self._pick(min(1, len(self._choices) - 1), "one", shape)

    def is_in(self, val: Any) -> bool:
        """Whether ``val`` is in one of the choices (equal to one, for non-tensor choices)."""
        if isinstance(self._choices[0], TensorSpec):
            return any(c.is_in(val) for c in self._choices)
        return any(_same_data(c, val) for c in self._choices)

    def explain(self, val: Any) -> str | None:
        """``None`` when ``val`` is in a choice, else why not."""
        return None if self.is_in(val) else f"it is in none of the {len(self._choices)} choices"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("Choice.project is not defined (which choice to project onto?).")

    def _map(self, fn: Any) -> Choice:
        if not isinstance(self._choices[0], TensorSpec):
            raise NotImplementedError("Shape operations need spec choices, not non-tensor data.")
        return Choice([fn(c) for c in self._choices])

    def expand(self, *shape: Any) -> Choice:
        """Every choice expanded."""
        return self._map(lambda c: c.expand(*shape))

    def unsqueeze(self, dim: int) -> Choice:
        """Every choice unsqueezed."""
        return self._map(lambda c: c.unsqueeze(dim))

    def squeeze(self, dim: int | None = None) -> Choice:
        """Every choice squeezed."""
        return self._map(lambda c: c.squeeze(dim))

    def reshape(self, *shape: Any) -> Choice:
        """Every choice reshaped."""
        return self._map(lambda c: c.reshape(*shape))

    def clone(self) -> Choice:
        """An independent copy."""
        return Choice([c.clone() for c in self._choices])

    def to(self, dest: Any) -> Choice:
        """Every choice moved (or cast)."""
        return Choice([c.to(dest) for c in self._choices])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Choice)
            and other.num_choices == self.num_choices
            and all(_same_data(a, b) for a, b in zip(self._choices, other._choices, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def _repr_fields(self) -> list[str]:
        return [f"num_choices={len(self._choices)}"]


def _same_data(a: Any, b: Any) -> bool:
    if isinstance(a, TensorSpec):
        return a == b
    if isinstance(a, (NonTensorData, NonTensorStack)):
        if not isinstance(b, (NonTensorData, NonTensorStack)):
            return False
        return a.tolist() == b.tolist() if isinstance(a, NonTensorStack) else a.data == b.data
    return bool(a == b)
