"""One conversation, measured: played into the app, then asked its questions about speaker A,
with the baselines and the embedding requests counted on the way."""

from __future__ import annotations

from bench.long_conversations.dataset import ANSWERABLE, Conversation, questions_about, wrong_speaker_traps
from bench.long_conversations.ingest import ingest
from bench.long_conversations.questions import Probe, ask, traps_passed_off
from bench.long_conversations.table import Run
from infra.tokens import estimate_tokens
from memory.selectors import memory_list_for_user


def measure_conversation(conversation: Conversation, probe: Probe) -> Run:
    look_back = probe.look_back
    spent = {"look-back": 0}

    def index(user_id: int) -> int:
        # The look-back's own requests, counted apart within the ingest's.
        before = probe.embedding_requests()
        assert look_back.index is not None
        indexed = look_back.index(user_id)
        spent["look-back"] += probe.embedding_requests() - before
        return indexed

    before = probe.embedding_requests()
    done = ingest(conversation, index_exchanges=index if look_back.index is not None else None)
    ingest_embeddings = probe.embedding_requests() - before
    asked = ask(conversation, done, questions_about(conversation, conversation.speaker_a, ANSWERABLE), probe)
    traps = traps_passed_off(conversation, done, wrong_speaker_traps(conversation), look_back)
    kept_keys = {m.key for m in memory_list_for_user(user=done.user)}
    observations = conversation.observations_of(conversation.speaker_a)
    return Run(
        conversation=conversation,
        done=done,
        asked=asked,
        ingest_embeddings=ingest_embeddings,
        look_back_embeddings=spent["look-back"],
        traps=traps,
        # The baselines' sizes: every observation of A as one list, and every turn as said.
        observations_tokens=estimate_tokens("\n".join(o.text for o in observations)),
        whole_tokens=estimate_tokens(
            "\n".join(f"{t.speaker}: {t.text}" for s in conversation.sessions for t in s.turns)
        ),
        kept=len(kept_keys & set(done.observation_of_key)),
    )
