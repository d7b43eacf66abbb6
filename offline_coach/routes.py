"""Where the offline coach answers (the OpenAI API's paths) and the embedding models it serves."""

from __future__ import annotations

from offline_coach import minilm
from offline_coach.bag_of_words import MODEL_NAME as BAG_OF_WORDS

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"
# Where it proves it is the offline coach the run command started (server.py: identity).
IDENTITY_PATH = "/v1/offline-coach/identity"
# The embedding models it serves: the real one, and the bag of words tests control exactly.
EMBEDDING_MODELS = (minilm.MODEL_NAME, BAG_OF_WORDS)
