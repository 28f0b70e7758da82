"""TicTacToeEnv: games played move by move, checked against boards written by hand."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import TicTacToeEnv, check_env_specs


def _play(env, moves, batch=()):
    td = env.reset(TensorDict(batch_size=batch)) if batch else env.reset()
    out = []
    for m in moves:
        td = env.step(td.set("action", torch.as_tensor(m)))
        out.append(td["next"].clone())
        td = env.step_mdp(td)
    return out


def test_board_is_seen_by_the_player_to_move():
    steps = _play(TicTacToeEnv(), [4, 0])
    assert steps[0]["board"].flatten().tolist() == [-1, -1, -1, -1, 0, -1, -1, -1, -1]
    assert steps[0]["turn"].item() == 1
    # player 0 to move again: its centre stone is 1, player 1's corner 0
    assert steps[1]["board"].flatten().tolist() == [0, -1, -1, -1, 1, -1, -1, -1, -1]
    assert steps[1]["mask"].tolist() == [False, True, True, True, False, True, True, True, True]


@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        ([0, 3, 1, 4, 2], 0),  # top row
        ([0, 1, 3, 2, 6], 0),  # left column
        ([0, 1, 4, 2, 8], 0),  # main diagonal
        ([0, 2, 1, 4, 3, 6], 1),  # anti-diagonal, player 1
    ],
)
def test_a_line_wins_and_ends_the_game(moves, winner):
    steps = _play(TicTacToeEnv(), moves)
    last = steps[-1]
    assert last["done"].item() and last["terminated"].item()
    assert last[f"player{winner}", "reward"].item() == 1.0
    assert last[f"player{1 - winner}", "reward"].item() == 0.0
    assert not any(s["done"].item() for s in steps[:-1])


def test_a_full_board_is_a_draw():
    steps = _play(TicTacToeEnv(), [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert steps[-1]["done"].item() and not steps[-1]["mask"].any()
    assert all(s["player0", "reward"].item() == 0 and s["player1", "reward"].item() == 0
               for s in steps)  # fmt: skip


def test_taken_square_raises():
    with pytest.raises(ValueError, match="square that is taken"):
        _play(TicTacToeEnv(), [4, 4])


def test_batched_games_are_independent():
    env = TicTacToeEnv()
    steps = _play(env, [[0, 8], [3, 7], [1, 6], [4, 0], [2, 5]], batch=[2])
    assert steps[-1]["done"].squeeze(-1).tolist() == [True, False]
    assert steps[-1]["player0", "reward"].squeeze(-1).tolist() == [1.0, 0.0]
    assert env.batch_size == (2,)


def test_single_player_gets_a_random_legal_reply():
    torch.manual_seed(0)
    env = TicTacToeEnv(single_player=True)
    check_env_specs(env)
    td = env.step(env.reset().set("action", torch.tensor(4)))["next"]
    board = td["board"].flatten()
    # player 0 to move again: its stone (1) at the centre, one reply (0) elsewhere
    assert td["turn"].item() == 0 and board[4] == 1
    assert (board == 0).sum() == 1 and (board == -1).sum() == 7


def test_random_rollouts_follow_the_rules():
    torch.manual_seed(0)
    env = TicTacToeEnv()
    check_env_specs(env)
    r = env.rollout(20, tensordict=TensorDict(batch_size=[8]), break_when_any_done=False)
    assert r.shape == (8, 20)
    # a game's moves fill distinct squares: empty squares drop by one each move
    empty = r["next", "mask"].sum(-1)
    fresh = r["mask"].sum(-1)
    assert (empty == fresh - 1).all()
