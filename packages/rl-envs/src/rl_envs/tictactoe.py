"""``TicTacToeEnv``: two-player (or one player against random moves) tic-tac-toe in torch.

The env is stateless (TorchRL's design): the whole game state lives in the TensorDict
(``"board"``, ``"turn"``, ``"mask"``), so ``reset(TensorDict(batch_size=[n]))`` plays ``n``
games at once; the env adopts the batch size of the TensorDict it is reset with, as
``DreamerEnv`` does. The board is seen by the player to move: ``1`` marks its stones,
``0`` the opponent's, ``-1`` an empty square; it flips after every move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.specs import Bounded, Categorical, Composite, Unbounded

__all__ = ["TicTacToeEnv"]

# the 8 lines of the board, as indices into the flattened 3x3 board
_LINES = torch.tensor(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)


class TicTacToeEnv(EnvBase):
    """Tic-tac-toe; rewards ``("player0", "reward")`` / ``("player1", "reward")``.

    Observations (and state): ``"board"`` (int32 ``[3, 3]``, from the mover's view),
    ``"turn"`` (int32 ``[1]``, the player to move, 0 or 1) and ``"mask"`` (bool ``[9]``,
    the empty squares). The action is the square, 0..8 (``Categorical(9)``, shape ``()``).
    A win gives the winner a reward of 1; the game ends (``terminated``) on a win or a
    full board. Random actions (``rand_action``, ``rollout`` without a policy) pick an
    empty square. Playing a taken square raises.

    Args:
        single_player: player 1 plays uniformly random legal moves inside each step, so
            the caller plays player 0 only.
        device: the device of the tensors.

    Example:
        >>> from tensordict import TensorDict
        >>> env = TicTacToeEnv()
        >>> r = env.rollout(10, tensordict=TensorDict(batch_size=[4]))
        >>> r.batch_size[0], bool(r.batch_size[1] <= 9), env.batch_size
        (4, True, torch.Size([4]))
        >>> td = env.reset().set("action", torch.tensor(4))
        >>> env.step(td)["next", "board"].flatten().tolist()
        [-1, -1, -1, -1, 0, -1, -1, -1, -1]
    """

    def __init__(self, *, single_player: bool = False, device: Any = None) -> None:
        super().__init__(device=device)
        self.single_player = single_player
        self.observation_spec = Composite(
            board=Bounded(-1, 1, shape=(3, 3), dtype=torch.int32),
            turn=Categorical(2, shape=(1,), dtype=torch.int32),
            mask=Categorical(2, shape=(9,), dtype=torch.bool),
        )
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Categorical(9, shape=())
        self.reward_spec = Composite(
            {("player0", "reward"): Unbounded((1,)), ("player1", "reward"): Unbounded((1,))}
        )

    def set_batch_size(self, batch_size: Sequence[int] | torch.Size) -> None:
        """Gives the env (and its specs) a new batch size: that many games at once."""
        batch_size = torch.Size(batch_size)
        if batch_size == self.batch_size:
            return
        specs = {
            "observation_spec_unbatched": self.full_observation_spec_unbatched,
            "action_spec_unbatched": self.full_action_spec_unbatched,
            "reward_spec_unbatched": self.full_reward_spec_unbatched,
            "done_spec_unbatched": self.full_done_spec_unbatched,
            "state_spec_unbatched": self.full_state_spec_unbatched,
        }
        self._batch_size = batch_size
        for name, spec in specs.items():
            setattr(self, name, spec)

    def reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Starts new games, as many as ``tensordict``'s batch holds (one without it)."""
        self.set_batch_size(() if tensordict is None else tensordict.batch_size)
        return super().reset(tensordict, **kwargs)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        shape = self.batch_size
        return TensorDict(
            board=torch.full((*shape, 3, 3), -1, dtype=torch.int32, device=self.device),
            turn=torch.zeros((*shape, 1), dtype=torch.int32, device=self.device),
            mask=torch.ones((*shape, 9), dtype=torch.bool, device=self.device),
            batch_size=shape,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self._move(tensordict.get("board"), tensordict.get("turn"), tensordict.get("action"))
        if self.single_player:
            reply = ~out.get("done").squeeze(-1)
            if bool(reply.any()):
                square = self._random_square(out.get("mask"))
                answer = self._move(out.get("board"), out.get("turn"), square, active=reply)
                out = _merge_reply(reply, answer, out)
        return out

    def _move(
        self,
        board: torch.Tensor,
        turn: torch.Tensor,
        action: torch.Tensor,
        active: torch.Tensor | None = None,
    ) -> TensorDict:
        """The position after ``action``; only ``active`` games (default all) are checked."""
        flat = board.flatten(-2).clone()
        square = action.long().reshape(*flat.shape[:-1], 1)
        taken = (flat.gather(-1, square) != -1).squeeze(-1)
        if bool((taken if active is None else taken & active).any()):
            raise ValueError(
                "TicTacToeEnv.step(): the action plays a square that is taken (board value "
                "!= -1). Pick an empty square: td['mask'] flags them (rand_action does)."
            )
        flat.scatter_(-1, square, 1)
        wins = (flat[..., _LINES.to(flat.device)] == 1).all(-1).any(-1, keepdim=True)
        mask = flat == -1
        done = wins | ~mask.any(-1, keepdim=True)
        batch = board.shape[:-2]
        return TensorDict(
            {
                "board": torch.where(flat == -1, flat, 1 - flat).reshape(board.shape),
                "turn": 1 - turn,
                "mask": mask,
                ("player0", "reward"): (wins & (turn == 0)).float(),
                ("player1", "reward"): (wins & (turn == 1)).float(),
                "terminated": done,
                "done": done.clone(),
            },
            batch_size=batch,
            device=self.device,
        )

    @staticmethod
    def _random_square(mask: torch.Tensor) -> torch.Tensor:
        flat = mask.reshape(-1, 9).float()
        flat[flat.sum(-1) == 0] = 1.0  # finished games: any square (the move is discarded)
        return torch.multinomial(flat, 1).reshape(mask.shape[:-1])

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes a uniformly random empty square under ``"action"`` (a reset if no input)."""
        if tensordict is None:
            tensordict = self.reset()
        return tensordict.set("action", self._random_square(tensordict.get("mask")))

    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> TensorDictBase:
        """:meth:`EnvBase.rollout`; without a policy, random legal moves (``rand_action``)."""
        if policy is None and kwargs.get("actions") is None:
            policy = self.rand_action
        start = kwargs.get("tensordict")
        self.set_batch_size(() if start is None else start.batch_size)
        return super().rollout(max_steps, policy, *args, **kwargs)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            torch.manual_seed(seed)


def _merge_reply(select: torch.Tensor, reply: TensorDict, first: TensorDict) -> TensorDict:
    """``reply`` where ``select`` else ``first``; the rewards of both moves add up."""
    out = first.clone()
    for key in reply.keys(True, True):
        value = reply.get(key)
        m = select.reshape(*select.shape, *([1] * (value.ndim - select.ndim)))
        if isinstance(key, tuple) and key[-1] == "reward":
            out.set(key, first.get(key) + torch.where(m, value, 0.0))
        else:
            out.set(key, torch.where(m, value, first.get(key)))
    return out
