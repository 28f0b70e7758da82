"""Run N copies of one architecture at once: stacked parameters + ``torch.vmap``."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call


def _reinit(module: nn.Module) -> None:
    for sub in module.modules():
        reset = getattr(sub, "reset_parameters", None)
        if callable(reset):
            reset()


class StackedParams(nn.Module):
    """The parameters of ``num_copies`` modules of one architecture, stacked on dim 0.

    Each copy is initialised independently (``reset_parameters`` of every
    submodule), then its tensors are stacked into one ``nn.Parameter`` per
    name. :meth:`call` runs the copies with ``torch.vmap`` over that dim, so
    N networks cost one batched kernel per layer instead of a Python loop.
    Buffers are stacked too but must not be updated in place (no BatchNorm).

    A template with lazy layers (``nn.LazyLinear``...) gives uninitialised
    placeholders that an optimizer may already hold: the first :meth:`call`
    sizes the template on one copy's slice of the input and materialises them
    in place.

    Args:
        module: the template.
        num_copies: number of copies.
        reset_parameters: re-initialise each copy (``False`` copies the template's values).
    """

    def __init__(self, module: nn.Module, num_copies: int, reset_parameters: bool = True) -> None:
        super().__init__()
        if num_copies < 1:
            raise ValueError(f"StackedParams: num_copies must be >= 1, got {num_copies}.")
        self.num_copies = num_copies
        self.reset_on_copy = reset_parameters
        self._names = [n for n, _ in module.named_parameters()]
        self._buffer_names = [n for n, _ in module.named_buffers()]
        lazy = any(isinstance(p, nn.parameter.UninitializedParameter) for p in module.parameters())
        if lazy:
            if self._buffer_names:
                raise ValueError(
                    "StackedParams: a lazy module with buffers cannot be stacked; give it explicit "
                    "input sizes."
                )
            # Placeholders an optimizer can hold now; the first call() materialises them in place.
            self.params = nn.ParameterList(
                nn.parameter.UninitializedParameter() for _ in self._names
            )
            self._template = [module]
            self._lazy = True
            return
        self._lazy = False
        self._stack(module)

    def _stack(self, module: nn.Module) -> None:
        copies = []
        for _ in range(self.num_copies):
            c = copy.deepcopy(module)
            if self.reset_on_copy:
                _reinit(c)
            copies.append(c)
        stacked = [
            torch.stack([dict(c.named_parameters())[n].detach() for c in copies])
            for n in self._names
        ]
        if self._lazy:
            with torch.no_grad():
                for placeholder, value in zip(self.params, stacked, strict=True):
                    placeholder.materialize(value.shape, device=value.device, dtype=value.dtype)
                    placeholder.copy_(value)
        else:
            self.params = nn.ParameterList(nn.Parameter(value) for value in stacked)
        for i, n in enumerate(self._buffer_names):
            self.register_buffer(
                f"buffer_{i}", torch.stack([dict(c.named_buffers())[n] for c in copies])
            )
        # The template runs on "meta": functional_call swaps every tensor in, so it holds none.
        self._template = [copy.deepcopy(module).to("meta")]
        self._lazy = False

    def _materialize(self, inputs: tuple[torch.Tensor, ...], dims: tuple[int | None, ...]) -> None:
        """Size the lazy template on one copy's slice of ``inputs``, then stack its copies."""
        template = self._template[0]
        sliced = tuple(
            x if d is None else x.select(d, 0) for x, d in zip(inputs, dims, strict=True)
        )
        with torch.no_grad():
            template(*sliced)
        self._stack(template)

    def reset_parameters(self) -> None:
        """Re-initialise every copy independently, in place (a lazy stack waits for its first call)."""
        if self._lazy:
            return
        template = self._template[0]
        stored = [
            *self.params,
            *(getattr(self, f"buffer_{i}") for i in range(len(self._buffer_names))),
        ]
        device = stored[0].device if stored else None
        with torch.no_grad():
            for i in range(self.num_copies):
                fresh = copy.deepcopy(template).to_empty(device=device)
                _reinit(fresh)
                values = [
                    *(dict(fresh.named_parameters())[n] for n in self._names),
                    *(dict(fresh.named_buffers())[n] for n in self._buffer_names),
                ]
                for target, value in zip(stored, values, strict=True):
                    target[i].copy_(value)

    def tensors(self) -> dict[str, torch.Tensor]:
        """Name -> stacked tensor (parameters and buffers), leading dim = copies."""
        out = dict(zip(self._names, self.params, strict=True))
        for i, n in enumerate(self._buffer_names):
            out[n] = getattr(self, f"buffer_{i}")
        return out

    def call(
        self,
        *inputs: torch.Tensor,
        in_dims: int | tuple[int | None, ...] | None = None,
        out_dim: int = 0,
    ) -> torch.Tensor:
        """Run every copy; ``in_dims`` says which input dim (if any) is split among copies.

        Args:
            inputs: the positional inputs of the module.
            in_dims: ``None`` (every copy sees the whole input), an int (each
                copy gets its slice along that dim), or one entry per input.
            out_dim: where the copies dim goes in the output.

        Returns:
            The stacked outputs.
        """
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(inputs)
        if self._lazy:
            self._materialize(inputs, dims)
        template = self._template[0]

        def one(tensors: dict[str, torch.Tensor], *xs: torch.Tensor) -> torch.Tensor:
            return functional_call(template, tensors, xs)

        return torch.vmap(one, in_dims=(0, *dims), out_dims=out_dim, randomness="different")(
            self.tensors(), *inputs
        )

    def extra_repr(self) -> str:
        return f"num_copies={self.num_copies}, template={self._template[0].__class__.__name__}"


class Ensemble(nn.Module):
    """``num_copies`` independently initialised copies of a network, run in one vmapped call.

    The REDQ critic (Chen et al., 2021) is ``Ensemble(qnet, 10)``: every copy
    sees the same input and the output gains a leading dim of size
    ``num_copies``. With ``split_input_dim=d`` each copy instead gets its own
    slice of the inputs along dim ``d`` (stacked target computations).

    Args:
        module: a network (instance) or a zero-argument factory returning one.
        num_copies: number of members.
        split_input_dim: ``None`` to broadcast inputs, or the input dim split among members.
        reset_parameters: re-initialise each member independently.

    Examples:
        >>> import torch
        >>> from rl_modules import MLP
        >>> qnets = Ensemble(MLP(in_features=5, out_features=1, num_cells=[8]), num_copies=4)
        >>> qnets(torch.zeros(32, 5)).shape
        torch.Size([4, 32, 1])
    """

    def __init__(
        self,
        module: nn.Module | Callable[[], nn.Module],
        num_copies: int,
        split_input_dim: int | None = None,
        reset_parameters: bool = True,
    ) -> None:
        super().__init__()
        template = module if isinstance(module, nn.Module) else module()
        self.stacked = StackedParams(template, num_copies, reset_parameters)
        self.split_input_dim = split_input_dim

    @property
    def num_copies(self) -> int:
        return self.stacked.num_copies

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self.split_input_dim is not None:
            for x in inputs:
                if x.shape[self.split_input_dim] != self.num_copies:
                    raise ValueError(
                        f"Ensemble: input dim {self.split_input_dim} has size "
                        f"{x.shape[self.split_input_dim]}, expected num_copies={self.num_copies}."
                    )
        return self.stacked.call(*inputs, in_dims=self.split_input_dim, out_dim=0)
