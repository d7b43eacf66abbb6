"""The offline coach: an OpenAI-compatible model server that ships with the app.

It lets the app run with no OpenAI key (`manage.py offline_coach`) and lets tests script
the model over real HTTP (`ModelServer(scripted=True)`). Its answers come from a
deterministic, rule-based coach; its embeddings from all-MiniLM-L6-v2 (`minilm`), or, for
tests that need exact control, from a bag of words (`bag_of_words_embedding`).
"""

from __future__ import annotations

from offline_coach.bag_of_words import bag_of_words_embedding
from offline_coach.script import Pause
from offline_coach.server import ModelServer

__all__ = ["ModelServer", "Pause", "bag_of_words_embedding"]
