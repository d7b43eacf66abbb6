"""How many tokens a text costs a model, estimated without a tokenizer."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    # About four characters a token for English; no tokenizer download is needed, and
    # budgets only have to be roughly right.
    return math.ceil(len(text) / CHARS_PER_TOKEN)
