"""Reading the policy's last reply out of a chat env's step input."""

from __future__ import annotations

from tensordict import TensorDictBase


def reply_texts(tensordict: TensorDictBase, who: str) -> list[str]:
    """The content of the last message of ``("history", "full")`` for each row.

    Args:
        tensordict: the step input of a chat env (the policy wrote ``("history", "full")``).
        who: the transform's name, for the error message.

    Raises:
        KeyError: no ``("history", "full")`` entry.
    """
    full = tensordict.get(("history", "full"), None)
    if full is None:
        raise KeyError(
            f"{who} reads the policy's reply from ('history', 'full'); the step input has keys "
            f"{sorted(map(str, tensordict.keys(True)))}. Run it in a ChatEnv after a policy that writes it."
        )
    return [row[-1].content for row in full.unbind(0)]
