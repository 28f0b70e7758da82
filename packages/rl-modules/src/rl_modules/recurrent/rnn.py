"""LSTM and GRU TensorDict modules with hidden states as keys and resets at ``is_init``."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, dispatch
from tensordict.utils import NestedKey
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rl_modules._keys import check_in_keys
from rl_modules.recurrent._segments import pad_segments, split_at_resets, unpad_segments
from rl_modules.recurrent.canonical import canonicalize_rnn_subset
from rl_modules.recurrent.mode import recurrent_mode
from rl_modules.recurrent.primer import RecurrentStatePrimer, StateSpec
from rl_modules.recurrent.python_rnn import GRU, LSTM, gru_cell, lstm_cell

States = tuple[torch.Tensor, ...]


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", key) if isinstance(key, str) else ("next", *key)


ResetPath = Literal["auto", "packed", "loop"]


def _cell_loop(
    rnn: nn.LSTM | nn.GRU, x: torch.Tensor, h0: States, is_init: torch.Tensor
) -> tuple[torch.Tensor, States]:
    """Layer by layer, step by step with the fused ATen cell; states reset where ``is_init``.

    Returns the last layer's outputs ``[N, T, H]`` and every state after
    every step, each ``[T, layers, N, H]``.
    """
    keep = (~is_init).to(x.dtype).unsqueeze(-1)  # [N, T, 1]
    is_lstm = isinstance(rnn, nn.LSTM)
    python = isinstance(rnn, (LSTM, GRU))  # plain-op cells: vmap has no rule for ATen's
    inp = x
    layers: list[list[torch.Tensor]] = [[] for _ in h0]
    for layer in range(rnn.num_layers):
        weights = [
            getattr(rnn, f"weight_ih_l{layer}"),
            getattr(rnn, f"weight_hh_l{layer}"),
            getattr(rnn, f"bias_ih_l{layer}", None),
            getattr(rnn, f"bias_hh_l{layer}", None),
        ]
        state = tuple(h[layer] for h in h0)
        per_step: list[list[torch.Tensor]] = [[] for _ in h0]
        for t in range(x.shape[1]):
            k = keep[:, t]
            if is_lstm:
                h, c = state[0] * k, state[1] * k
                state = (
                    lstm_cell(inp[:, t], h, c, *weights)
                    if python
                    else torch.lstm_cell(inp[:, t], (h, c), *weights)
                )
            else:
                cell = gru_cell if python else torch.gru_cell
                state = (cell(inp[:, t], state[0] * k, *weights),)
            for j, s in enumerate(state):
                per_step[j].append(s)
        for j in range(len(h0)):
            layers[j].append(torch.stack(per_step[j]))  # [T, N, H]
        inp = layers[0][-1].transpose(0, 1)
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            inp = nn.functional.dropout(inp, rnn.dropout, training=True)
    return inp, tuple(torch.stack(ls, 1) for ls in layers)


def run_rnn_with_resets(
    rnn: nn.LSTM | nn.GRU,
    x: torch.Tensor,
    h0: States,
    is_init: torch.Tensor,
    reset_path: ResetPath = "auto",
) -> tuple[torch.Tensor, States, torch.Tensor]:
    """Run ``rnn`` over ``x [N, T, F]`` restarting from zero wherever ``is_init [N, T]``.

    ``h0`` (each ``[layers, N, H]``) is the state before step 0 (already zeroed
    where ``is_init[:, 0]``). With no reset after step 0 this is one ATen/cuDNN
    call. Otherwise, ``"packed"`` cuts the batch into segments at the
    resets and runs them as one packed sequence (best with cuDNN), and
    ``"loop"`` steps the fused ATen cell through time with the reset masks
    (best on CPU, where packed sequences are slow); ``"auto"`` picks by device.

    Returns:
        ``(y [N, T, H], final states (each [layers, S, H]), last [S, 2])``: the
        outputs, the state after the last step of each segment and the
        ``(n, t)`` of that step.
    """
    n, t = is_init.shape
    if not bool(is_init[:, 1:].any()):
        y, hn = rnn(x, h0 if len(h0) > 1 else h0[0])
        hn = hn if isinstance(hn, tuple) else (hn,)
        arange = torch.arange(n, device=x.device)
        return y, hn, torch.stack([arange, torch.full_like(arange, t - 1)], -1)
    seg = split_at_resets(is_init)
    python_rnn = isinstance(rnn, (LSTM, GRU))  # takes no packed sequences: always the loop
    if reset_path == "loop" or python_rnn or (reset_path == "auto" and x.device.type != "cuda"):
        y, every = _cell_loop(rnn, x, h0, is_init)
        # State after each segment's last step: [T, L, N, H][t, :, n] -> [S, L, H].
        finals = tuple(s[seg.last[:, 1], :, seg.last[:, 0]].transpose(0, 1) for s in every)
        return y, finals, seg.last
    padded = pad_segments(x, seg)
    # Only the segment starting at t = 0 of each row uses h0; later ones start at zero.
    seg_h0 = tuple(
        h.new_zeros(h.shape[0], len(seg.lengths), h.shape[2]).index_copy(1, seg.first, h)
        for h in h0
    )
    packed = pack_padded_sequence(padded, seg.lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, hn = rnn(packed, seg_h0 if len(seg_h0) > 1 else seg_h0[0])
    y, _ = pad_packed_sequence(out, batch_first=True, total_length=seg.max_len)
    hn = hn if isinstance(hn, tuple) else (hn,)
    return unpad_segments(y, seg), hn, seg.last


def _backend_reset_path(recurrent_backend: str, who: str) -> ResetPath:
    """TorchRL's ``recurrent_backend`` as this package's ``reset_path``."""
    if recurrent_backend == "auto":
        return "auto"
    if recurrent_backend == "pad":
        return "packed"
    if recurrent_backend in ("scan", "triton"):
        raise ValueError(
            f"{who}: recurrent_backend={recurrent_backend!r} is not available in rl_modules; use "
            "'auto' or 'pad' (reset_path= picks 'packed' segments or the fused-cell 'loop'). "
            "Triton recurrent cells with resets live in the rl-kernels package."
        )
    raise ValueError(
        f"{who}: recurrent_backend must be one of 'auto', 'pad', 'scan' or 'triton', got "
        f"{recurrent_backend!r}."
    )


class _RecurrentModule(TensorDictModuleBase):
    """Everything :class:`LSTMModule` and :class:`GRUModule` share; they differ only in these
    class attributes (the wrapped RNN's classes, its attribute name, the state names)."""

    _state_names: tuple[str, ...]
    _default_state_keys: tuple[str, ...]
    _rnn_attr: str  # "lstm" or "gru": TorchRL's attribute name of the wrapped RNN
    _torch_class: type[nn.LSTM] | type[nn.GRU]
    _python_class: type[LSTM] | type[GRU]

    def __init__(
        self,
        rnn: nn.LSTM | nn.GRU | None,
        *,
        input_size: int | None,
        hidden_size: int | None,
        num_layers: int,
        bias: bool,
        batch_first: bool,
        dropout: float,
        bidirectional: bool,
        device: torch.device | str | None,
        python_based: bool,
        **keys: Any,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        if rnn is None:
            if input_size is None or hidden_size is None:
                raise ValueError(f"{who}: pass input_size and hidden_size, or {self._rnn_attr}=.")
            if python_based and bidirectional:
                raise ValueError(
                    f"{who}: python_based=True does not support bidirectional "
                    f"{self._rnn_attr.upper()}s."
                )
            rnn_class = self._python_class if python_based else self._torch_class
            rnn = rnn_class(
                input_size=input_size,
                hidden_size=hidden_size,
                num_layers=num_layers,
                bias=bias,
                batch_first=batch_first,
                dropout=dropout,
                bidirectional=bidirectional,
                device=device,
            )
        _check_rnn(rnn, who)
        setattr(self, self._rnn_attr, rnn)
        self._setup_keys(**keys)

    @property
    def rnn(self) -> nn.LSTM | nn.GRU:
        """The wrapped RNN (``self.lstm`` or ``self.gru``)."""
        return getattr(self, self._rnn_attr)

    def _setup_keys(
        self,
        *,
        in_key: NestedKey | None,
        in_keys: Sequence[NestedKey] | None,
        out_key: NestedKey | None,
        out_keys: Sequence[NestedKey] | None,
        is_init_key: NestedKey,
        default_recurrent_mode: bool | None,
        reset_path: ResetPath,
        check_carried_state: bool,
        missing_state: Literal["warn", "raise"],
        recurrent_backend: str | None,
    ) -> None:
        who = type(self).__name__
        self.check_carried_state = check_carried_state
        if missing_state not in ("warn", "raise"):
            raise ValueError(
                f"{who}: missing_state must be 'warn' or 'raise', got {missing_state!r}."
            )
        self.missing_state = missing_state
        self._warned_missing_state = False
        self.recurrent_backend = recurrent_backend
        if recurrent_backend is not None:
            reset_path = _backend_reset_path(recurrent_backend, who)
        if reset_path not in ("auto", "packed", "loop"):
            raise ValueError(
                f"{who}: reset_path must be 'auto', 'packed' or 'loop', got {reset_path!r}."
            )
        self.reset_path = reset_path
        n_states = len(self._state_names)
        for name, keys in (("in_keys", in_keys), ("out_keys", out_keys)):
            if isinstance(keys, str):
                raise TypeError(
                    f"{who}: incompatible function arguments: {name} must be a list of keys "
                    f"[data, states...], got the string {keys!r}; use {name[:-1]}= for one key."
                )
        if (in_key is None) == (in_keys is None):
            raise ValueError(f"{who}: pass exactly one of in_key= or in_keys=.")
        if in_keys is None:
            in_keys = [in_key, *self._default_state_keys]
        in_keys = list(in_keys)
        if len(in_keys) == 2 + n_states:
            # TorchRL's form: the trajectory-start flag as the last in_key
            if is_init_key != "is_init" and in_keys[-1] != is_init_key:
                raise ValueError(
                    f"{who}: the last in_key {in_keys[-1]!r} and is_init_key={is_init_key!r} "
                    "disagree; give the flag's key once."
                )
            is_init_key = in_keys.pop()
        if len(in_keys) != 1 + n_states:
            raise ValueError(
                f"{who}: in_keys must be [input, {', '.join(self._state_names)} states] "
                f"(optionally followed by the is_init key), got {in_keys}."
            )
        if out_keys is None:
            if out_key is None:
                raise ValueError(f"{who}: pass out_key= or out_keys=.")
            out_keys = [out_key, *(_next(k) for k in in_keys[1:])]
        out_keys = list(out_keys)
        if len(out_keys) != 1 + n_states:
            raise ValueError(
                f"{who}: out_keys must be [output, next {', '.join(self._state_names)} states], "
                f"got {out_keys}."
            )
        self.in_keys = [*in_keys, is_init_key]
        self.out_keys = out_keys
        self.input_key, self.state_keys = in_keys[0], in_keys[1:]
        self.output_key, self.next_state_keys = out_keys[0], out_keys[1:]
        self.is_init_key = is_init_key
        self.default_recurrent_mode = bool(default_recurrent_mode)

    @property
    def recurrent_mode(self) -> bool:
        """Sequence mode inside ``set_recurrent_mode(True)``; else ``default_recurrent_mode``."""
        mode = recurrent_mode()
        return self.default_recurrent_mode if mode is None else mode

    @property
    def canonical_keys(self) -> list[NestedKey]:
        """The entries whose layout :meth:`canonicalize` fixes: ``in_keys`` then ``out_keys``."""
        return [*self.in_keys, *self.out_keys]

    def canonicalize(self, data: TensorDictBase, *, inplace: bool = False) -> TensorDictBase:
        """``data`` with this module's entries row-major (see :func:`canonicalize_rnn_subset`)."""
        return canonicalize_rnn_subset(data, [self], inplace=inplace)

    def make_tensordict_primer(
        self, primer_class: type | None = None, spec_class: type | None = None
    ) -> Any:
        """The states an env must carry, zero at reset.

        Without arguments, a :class:`RecurrentStatePrimer` (a ``{key: spec}``
        mapping of duck-typed specs of shape ``[num_layers, hidden_size]``).
        With ``primer_class`` and ``spec_class`` (e.g. rl_envs'
        ``TensorDictPrimer`` and ``Unbounded``), the built transform.
        """
        p = next(self.rnn.parameters())
        shape = torch.Size([self.rnn.num_layers, self.rnn.hidden_size])
        desc = RecurrentStatePrimer(
            {k: StateSpec(shape, p.dtype, p.device) for k in self.state_keys},
            reset_key=self.is_init_key,
        )
        if primer_class is None and spec_class is None:
            return desc
        if primer_class is None or spec_class is None:
            raise ValueError(
                f"{type(self).__name__}.make_tensordict_primer: pass both primer_class and spec_class, or neither."
            )
        return desc.build(primer_class, spec_class)

    def make_python_based(self) -> _RecurrentModule:
        """Swap the wrapped RNN for its Python version (same weights), in place; returns ``self``."""
        return self._swap_rnn(self._python_class)

    def make_cudnn_based(self) -> _RecurrentModule:
        """Swap the wrapped RNN back to ``torch.nn``'s (cuDNN on GPU; same weights), in place."""
        return self._swap_rnn(self._torch_class)

    def _swap_rnn(self, cls: type) -> _RecurrentModule:
        rnn = self.rnn
        if type(rnn) is cls:
            return self
        new = cls(
            input_size=rnn.input_size,
            hidden_size=rnn.hidden_size,
            num_layers=rnn.num_layers,
            bias=rnn.bias,
            batch_first=rnn.batch_first,
            dropout=rnn.dropout,
            device=next(rnn.parameters()).device,
            dtype=next(rnn.parameters()).dtype,
        )
        new.load_state_dict(rnn.state_dict())
        setattr(self, self._rnn_attr, new)
        return self

    def _missing_state_error(self, tensordict: TensorDictBase, why: str) -> RuntimeError:
        present = sorted(map(str, tensordict.keys(True, True)))
        return RuntimeError(
            f"{type(self).__name__}: the input has no recurrent state {self.state_keys} {why} "
            f"(it holds {present}). The env does not carry the policy's state from step to step, "
            "so every step would silently restart from zeros. Fix: add the primer, e.g. "
            "env.append_transform(module.make_tensordict_primer()), "
            f"and an InitTracker transform writing {self.is_init_key!r}."
        )

    def _read_states(
        self,
        tensordict: TensorDictBase,
        batch: torch.Size,
        first_is_init: torch.Tensor | None,
        why: str,
    ) -> States:
        states = [tensordict.get(k, None) for k in self.state_keys]
        if all(s is not None for s in states):
            self._states_carried = True
            return tuple(states)
        self._states_carried = False
        if first_is_init is None or not bool(first_is_init.all()):
            error = self._missing_state_error(tensordict, why)
            if self.missing_state == "raise":
                raise error
            if not self._warned_missing_state:
                # TorchRL's behaviour: absent states start from zeros; say so once
                self._warned_missing_state = True
                warnings.warn(
                    f"{error} (Starting from zeros, as TorchRL does; pass missing_state='raise' "
                    "to make this an error.)",
                    UserWarning,
                    stacklevel=3,
                )
        p = next(self.rnn.parameters())
        zero = torch.zeros(
            *batch, self.rnn.num_layers, self.rnn.hidden_size, dtype=p.dtype, device=p.device
        )
        return tuple(zero for _ in self.state_keys)

    def _check_not_stale(
        self, tensordict: TensorDictBase, h: torch.Tensor, keep: torch.Tensor
    ) -> None:
        # A trained or random RNN state is never exactly zero after a step; an
        # all-zero state where is_init is False means the env re-injected its
        # initial value instead of the ("next", state) the module wrote.
        stale = keep.reshape(-1) & (h == 0).all(0).all(-1)
        if bool(stale.any()):
            raise RuntimeError(
                f"{type(self).__name__}: the recurrent state {self.state_keys[0]!r} is exactly zero "
                f"at a step where {self.is_init_key!r} is False ({int(stale.sum())} env(s)). The env "
                f"did not carry the state this module wrote to {self.next_state_keys[0]!r} (e.g. its "
                "step() replaced the 'next' entries, or a primer re-injected its initial value), so "
                "every step would silently restart from zeros. Fix the env so that step() keeps "
                "('next', state) entries written by the policy; pass check_carried_state=False only "
                "if zero states at non-initial steps are intended."
            )

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Run a step or a sequence (also callable with tensors: ``m(observation=x, ...)``)."""
        who = type(self).__name__
        check_in_keys(tensordict, [self.input_key], who)
        x = tensordict.get(self.input_key)
        is_init = tensordict.get(self.is_init_key, None)
        if self.recurrent_mode:
            return self._forward_sequence(tensordict, x, is_init)
        return self._forward_step(tensordict, x, is_init)

    def _forward_step(
        self, tensordict: TensorDictBase, x: torch.Tensor, is_init: torch.Tensor | None
    ) -> TensorDictBase:
        batch = x.shape[:-1]
        why = (
            f"and {self.is_init_key!r} is absent"
            if is_init is None
            else f"although {self.is_init_key!r} is not all True (not every env just reset)"
        )
        states = self._read_states(tensordict, batch, is_init, why)
        n = batch.numel()
        h0 = tuple(s.reshape(n, *s.shape[-2:]).transpose(0, 1) for s in states)
        if is_init is not None:
            keep = ~is_init.reshape(1, n, 1)
            # zeros injected for absent states are not a stale carried state
            if self.check_carried_state and self._states_carried:
                self._check_not_stale(tensordict, h0[0], keep)
            h0 = tuple(h * keep for h in h0)
        h0 = tuple(h.contiguous() for h in h0)
        y, hn = self.rnn(x.reshape(n, 1, x.shape[-1]), h0 if len(h0) > 1 else h0[0])
        hn = hn if isinstance(hn, tuple) else (hn,)
        tensordict.set(self.output_key, y.reshape(*batch, y.shape[-1]))
        for key, h in zip(self.next_state_keys, hn, strict=True):
            tensordict.set(key, h.transpose(0, 1).reshape(*batch, *h.shape[::2]))
        return tensordict

    def _forward_sequence(
        self, tensordict: TensorDictBase, x: torch.Tensor, is_init: torch.Tensor | None
    ) -> TensorDictBase:
        who = type(self).__name__
        if is_init is None:
            raise KeyError(
                f"{who}: sequence mode needs {self.is_init_key!r} to know where trajectories "
                "start inside the [*B, T] batch; add an InitTracker transform to the env (or "
                "write the flag into your data)."
            )
        if tensordict.batch_dims < 1:
            raise ValueError(
                f"{who}: sequence mode expects a TensorDict of batch shape [*B, T] (time last), "
                f"got batch shape {tuple(tensordict.batch_size)}. Outside a loss, run it in step "
                "mode (no set_recurrent_mode(True))."
            )
        batch, t = tensordict.batch_size[:-1], tensordict.batch_size[-1]
        n = batch.numel()
        init = is_init.reshape(n, t)
        states = self._read_states(
            tensordict,
            torch.Size([*batch, t]),
            init[:, 0],
            f"and {self.is_init_key!r} is not True at the first step of every sequence",
        )
        h0 = tuple(
            (s.reshape(n, t, *s.shape[-2:])[:, 0] * ~init[:, 0, None, None])
            .transpose(0, 1)
            .contiguous()
            for s in states
        )
        y, hn, last = run_rnn_with_resets(
            self.rnn, x.reshape(n, t, x.shape[-1]), h0, init, self.reset_path
        )
        tensordict.set(self.output_key, y.reshape(*batch, t, y.shape[-1]))
        for key, h in zip(self.next_state_keys, hn, strict=True):
            full = h.new_zeros(n, t, h.shape[0], h.shape[2])
            full = full.index_put((last[:, 0], last[:, 1]), h.transpose(0, 1))
            tensordict.set(key, full.reshape(*batch, t, h.shape[0], h.shape[2]))
        return tensordict


_RNN_ARGS = (
    "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
    "bidirectional", "device", "python_based", "in_key", "in_keys", "out_key", "out_keys",
    "is_init_key", "default_recurrent_mode", "reset_path", "check_carried_state",
    "missing_state", "recurrent_backend",
)  # fmt: skip


def _rnn_args(args: dict[str, Any]) -> dict[str, Any]:
    """The shared constructor arguments of :class:`LSTMModule` / :class:`GRUModule`."""
    return {name: args[name] for name in _RNN_ARGS}


def _check_rnn(rnn: nn.Module, who: str) -> None:
    if not rnn.batch_first:
        raise ValueError(f"{who}: the wrapped RNN must have batch_first=True.")
    if rnn.bidirectional:
        raise ValueError(f"{who}: bidirectional RNNs cannot run step by step; not supported.")
    if getattr(rnn, "proj_size", 0):
        raise ValueError(f"{who}: LSTMs with proj_size are not supported.")


class LSTMModule(_RecurrentModule):
    """An ``nn.LSTM`` reading/writing its hidden states ``h``, ``c`` as TensorDict keys.

    In step mode (collectors) the input is ``[*B, F]`` and the states
    ``[*B, num_layers, hidden]``; the states are zeroed where ``is_init`` is
    ``True`` and the new ones written to ``("next", key)``. If the states are
    absent they start at zero (as TorchRL); unless ``is_init`` says every env
    just reset, a one-time warning (or, with ``missing_state="raise"``, a
    ``RuntimeError``) says the env does not carry them.

    In sequence mode (``set_recurrent_mode(True)``, losses) the input is
    ``[*B, T, F]``; the state before step 0 is read from ``[..., 0]`` and the
    state restarts from zero wherever ``is_init`` is ``True`` inside the
    sequence: the outputs equal a step-by-step loop. Without resets inside
    the sequence it is one ATen/cuDNN call; otherwise the segments between
    resets are packed and run in one call. ``("next", key)`` holds the state
    after the last step of each segment, at that step, and zeros elsewhere
    (as TorchRL): the LSTM kernel exposes no intermediate cell states.

    Args:
        input_size: input features.
        hidden_size: hidden units.
        num_layers: stacked layers.
        bias: use biases.
        batch_first: must be ``True``.
        dropout: dropout between layers.
        bidirectional: must be ``False``.
        in_key: the input key (the state keys default to
            ``"recurrent_state_h"``, ``"recurrent_state_c"``).
        in_keys: ``[input, h, c]`` instead of ``in_key``.
        out_key: the output key (next states go to ``("next", h)``, ``("next", c)``).
        out_keys: ``[output, next h, next c]`` instead of ``out_key``.
        device: where the parameters live.
        lstm: an existing ``nn.LSTM`` to wrap instead of building one.
        default_recurrent_mode: mode outside any ``set_recurrent_mode`` block.
        is_init_key: the trajectory-start flag.
        reset_path: how sequences with resets inside run: ``"loop"`` (fused
            ATen cell stepped through time; fastest on CPU), ``"packed"``
            (segments as one packed sequence; fastest with cuDNN) or
            ``"auto"`` (by device). Both give the same values.
        check_carried_state: in step mode, raise when a state read at a step
            where ``is_init`` is False is exactly zero (the env dropped the
            state the module wrote and re-injected zeros).
        python_based: build the Python :class:`~rl_modules.LSTM` (vmap and
            compile friendly) instead of ``nn.LSTM``.
        recurrent_backend: TorchRL's name for the reset path: ``"auto"``, or
            ``"pad"`` (= ``reset_path="packed"``); ``"scan"`` / ``"triton"`` raise.
        missing_state: absent recurrent states at a step where ``is_init`` is
            not all True start from zeros with a one-time warning (``"warn"``,
            TorchRL's behaviour) or raise (``"raise"``).

    ``in_keys`` may end with the ``is_init`` key, as in TorchRL
    (``[input, h, c, "is_init"]``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_modules import set_recurrent_mode
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> td = TensorDict(obs=torch.zeros(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4])
        >>> lstm(td)["next", "recurrent_state_h"].shape
        torch.Size([4, 1, 8])
        >>> seq = TensorDict(obs=torch.zeros(4, 10, 3), is_init=torch.zeros(4, 10, 1, dtype=torch.bool),
        ...                  recurrent_state_h=torch.zeros(4, 10, 1, 8), recurrent_state_c=torch.zeros(4, 10, 1, 8),
        ...                  batch_size=[4, 10])
        >>> with set_recurrent_mode(True):
        ...     lstm(seq)["features"].shape
        torch.Size([4, 10, 8])
    """

    _state_names = ("h", "c")
    _default_state_keys = ("recurrent_state_h", "recurrent_state_c")
    _rnn_attr = "lstm"
    _torch_class = nn.LSTM
    _python_class = LSTM

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        in_key: NestedKey | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        lstm: nn.LSTM | None = None,
        default_recurrent_mode: bool | None = None,
        is_init_key: NestedKey = "is_init",
        reset_path: ResetPath = "auto",
        check_carried_state: bool = True,
        python_based: bool = False,
        recurrent_backend: str | None = None,
        missing_state: Literal["warn", "raise"] = "warn",
    ) -> None:
        super().__init__(lstm, **_rnn_args(locals()))


class GRUModule(_RecurrentModule):
    """An ``nn.GRU`` reading/writing its hidden state ``h`` as a TensorDict key.

    Same semantics as :class:`LSTMModule` with one state
    (``"recurrent_state"`` by default).

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional:
            ``nn.GRU`` arguments.
        in_key: the input key (the state key defaults to ``"recurrent_state"``).
        in_keys: ``[input, h]`` instead of ``in_key``.
        out_key: the output key (next state goes to ``("next", h)``).
        out_keys: ``[output, next h]`` instead of ``out_key``.
        device: where the parameters live.
        gru: an existing ``nn.GRU`` to wrap.
        default_recurrent_mode: mode outside any ``set_recurrent_mode`` block.
        is_init_key: the trajectory-start flag.
        reset_path: how sequences with resets inside run: ``"loop"`` (fused
            ATen cell stepped through time; fastest on CPU), ``"packed"``
            (segments as one packed sequence; fastest with cuDNN) or
            ``"auto"`` (by device). Both give the same values.
        check_carried_state: in step mode, raise when a state read at a step
            where ``is_init`` is False is exactly zero (the env dropped the
            state the module wrote and re-injected zeros).
        python_based: build the Python :class:`~rl_modules.GRU` (vmap and
            compile friendly) instead of ``nn.GRU``.
        recurrent_backend: TorchRL's name for the reset path: ``"auto"``, or
            ``"pad"`` (= ``reset_path="packed"``); ``"scan"`` / ``"triton"`` raise.
        missing_state: absent recurrent states at a step where ``is_init`` is
            not all True start from zeros with a one-time warning (``"warn"``,
            TorchRL's behaviour) or raise (``"raise"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> gru = GRUModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> td = TensorDict(obs=torch.zeros(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4])
        >>> gru(td)["next", "recurrent_state"].shape
        torch.Size([4, 1, 8])
    """

    _state_names = ("h",)
    _default_state_keys = ("recurrent_state",)
    _rnn_attr = "gru"
    _torch_class = nn.GRU
    _python_class = GRU

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        in_key: NestedKey | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        gru: nn.GRU | None = None,
        default_recurrent_mode: bool | None = None,
        is_init_key: NestedKey = "is_init",
        reset_path: ResetPath = "auto",
        check_carried_state: bool = True,
        python_based: bool = False,
        recurrent_backend: str | None = None,
        missing_state: Literal["warn", "raise"] = "warn",
    ) -> None:
        super().__init__(gru, **_rnn_args(locals()))
