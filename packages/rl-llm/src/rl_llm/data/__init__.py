"""Chat data: ``History`` and chat templates with their inverse parsers."""

from rl_llm.data.arithmetic import make_arithmetic_problems
from rl_llm.data.chat_templates import (
    CHATML_TEMPLATE,
    add_chat_template,
    check_round_trip,
    parse_chatml,
)
from rl_llm.data.history import History

__all__ = [
    "CHATML_TEMPLATE",
    "History",
    "add_chat_template",
    "check_round_trip",
    "make_arithmetic_problems",
    "parse_chatml",
]
