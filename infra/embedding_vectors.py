"""An embedding as an OpenAI-compatible server sends it, read as floats: a JSON list of
numbers, or base64 of little-endian float32 (OpenAI's compact form), whichever format was
asked for. Pure: the model gateway (infra/llm.py) asks, and says what a refusal means."""

from __future__ import annotations

import base64
import math
import struct


class UnreadableVector(ValueError):
    """What the server sent is no embedding; asking again would get the same."""


def vector_of(embedding: object) -> list[float]:
    """One embedding as floats, or UnreadableVector saying what is wrong with it."""
    if isinstance(embedding, str):
        try:
            packed = base64.b64decode(embedding, validate=True)
        except ValueError as error:
            raise UnreadableVector("an embedding came as text that is not base64") from error
        if not packed or len(packed) % 4:
            raise UnreadableVector("a base64 embedding is not a whole number of float32 values")
        vector = list(struct.unpack(f"<{len(packed) // 4}f", packed))
    elif isinstance(embedding, list) and all(
        isinstance(value, int | float) and not isinstance(value, bool) for value in embedding
    ):
        vector = [float(value) for value in embedding]
    else:
        raise UnreadableVector("an embedding came as neither a list of numbers nor base64")
    if not vector or not all(math.isfinite(value) for value in vector):
        raise UnreadableVector("an embedding was empty or held values that are not numbers")
    return vector
