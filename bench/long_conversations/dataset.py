"""LoCoMo's format, read: one conversation between two people in sessions, the facts noted
about each speaker per session, and questions with the turns that answer them.

The data is research data that never enters this repository: the benchmark takes its
folder as an argument. Pure: no Django, no database, so the tests read it in milliseconds.
The format (snap-research/locomo, its locomo10_v2 folder): `speaker_a`, `speaker_b`;
`session_K` (turns `{"speaker", "dia_id": "DK:T", "text"}`, some with a shared photo's
`blip_caption`), `session_K_date_time` ("1:56 pm on 8 May, 2023"), `session_K_observation`
(per speaker, `[[text, dia_id], ...]`, the dia_id sometimes a list), `session_K_summary`,
and `qa` (`question`, `answer`, `evidence`, `category`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Categories 1-4 are answerable (multi-hop, temporal, open-domain, single-hop); 5 is
# adversarial: a question that names the wrong speaker.
ANSWERABLE = (1, 2, 3, 4)
ADVERSARIAL = 5
_SESSION = re.compile(r"session_(\d+)")
# Evidence ids as the data has them, a few of them misspelt ("D:11:26", "D8:6; D9:17").
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
DATE_FORMAT = "%I:%M %p on %d %B, %Y"


class DatasetError(ValueError):
    """A file that is not a LoCoMo conversation; the message says which and why."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    # What was said, with a shared photo's caption: the person's words as the app keeps them.
    text: str


@dataclass(frozen=True)
class Observation:
    """A fact the dataset's authors noted about one speaker, and the turns it came from."""

    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Session:
    number: int
    at: datetime
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...]
    summary: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class Conversation:
    name: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    def turns(self) -> dict[str, Turn]:
        return {turn.dia_id: turn for session in self.sessions for turn in session.turns}

    def observations_of(self, speaker: str) -> list[Observation]:
        return [o for session in self.sessions for o in session.observations if o.speaker == speaker]


def load_conversation(path: Path) -> Conversation:
    """One LoCoMo conversation file (N.json), named N."""
    try:
        raw = json.loads(path.read_text())
        speaker_a, speaker_b = raw["speaker_a"], raw["speaker_b"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DatasetError(f"{path}: not a LoCoMo conversation ({error})") from None
    numbers = sorted(int(m.group(1)) for key in raw if (m := _SESSION.fullmatch(key)))
    # Some files name dates of sessions that have no turns: those sessions never happened.
    sessions = tuple(_session(raw, n, path) for n in numbers if raw[f"session_{n}"])
    known = {turn.dia_id for session in sessions for turn in session.turns}
    questions = tuple(_question(q, known) for q in raw.get("qa", []))
    return Conversation(path.stem, speaker_a, speaker_b, sessions, questions)


def load_conversations(folder: Path, names: list[str] | None = None) -> list[Conversation]:
    """The conversations of a LoCoMo folder (`names`: only these, e.g. ["26", "30"])."""
    paths = [folder / f"{name}.json" for name in names] if names else sorted(folder.glob("*.json"))
    missing = [str(path) for path in paths if not path.is_file()]
    if missing or not paths:
        raise DatasetError(f"no LoCoMo conversation at {', '.join(missing) or folder}")
    return [load_conversation(path) for path in paths]


def _session(raw: dict[str, Any], number: int, path: Path) -> Session:
    try:
        at = datetime.strptime(raw[f"session_{number}_date_time"], DATE_FORMAT).replace(tzinfo=UTC)
    except (KeyError, ValueError) as error:
        raise DatasetError(f"{path}: session {number} has no date in the format ({error})") from None
    turns = tuple(
        Turn(t["dia_id"], t["speaker"], _said(t)) for t in raw[f"session_{number}"] if str(t.get("text", "")).strip()
    )
    noted = raw.get(f"session_{number}_observation") or {}
    observations = tuple(
        Observation(speaker, text, _dia_ids(source))
        for speaker, facts in noted.items()
        for text, source in (fact[:2] for fact in facts if len(fact) >= 2)
    )
    return Session(number, at, turns, observations, str(raw.get(f"session_{number}_summary", "")).strip())


def _said(turn: dict[str, Any]) -> str:
    text = " ".join(str(turn["text"]).split())
    caption = turn.get("blip_caption")
    # The app keeps words only: a shared photo is kept as what it shows.
    return f"{text} [shares a photo: {caption}]" if caption else text


def _dia_ids(source: Any) -> tuple[str, ...]:
    parts = source if isinstance(source, list) else [source]
    return tuple(f"D{s}:{t}" for part in parts for s, t in _DIA_ID.findall(str(part)))


def _question(raw: dict[str, Any], known: set[str]) -> Question:
    # An evidence id naming no turn (the data has one or two) can never be found: dropped.
    evidence = tuple(dia_id for dia_id in _dia_ids(raw.get("evidence", [])) if dia_id in known)
    answer = raw.get("answer", raw.get("adversarial_answer", ""))
    return Question(str(raw["question"]), int(raw["category"]), evidence, str(answer))


def questions_about(conversation: Conversation, speaker: str, categories: tuple[int, ...]) -> list[Question]:
    """The questions of `categories` that concern `speaker`: one of their evidence turns is
    theirs (a question about both speakers concerns each)."""
    turns = conversation.turns()
    return [
        q
        for q in conversation.questions
        if q.category in categories and any(turns[dia_id].speaker == speaker for dia_id in q.evidence)
    ]


def wrong_speaker_traps(conversation: Conversation) -> list[Question]:
    """Adversarial questions answered by speaker B's words: asked of the person, a look-back
    that found B's turn must say B said it, never pass it off as the person's."""
    turns = conversation.turns()
    return [
        q
        for q in conversation.questions
        if q.category == ADVERSARIAL and any(turns[d].speaker == conversation.speaker_b for d in q.evidence)
    ]


# After these, the person's name is the subject: "When did Caroline go" -> "When did I go".
_ASKING = {
    "does": "do",
    "is": "am",
    "was": "was",
    "has": "have",
    "did": "did",
    "would": "would",
    "will": "will",
    "can": "can",
    "could": "could",
    "should": "should",
    "might": "might",
}
# The person's name as the subject, with a verb that agrees with it: "Caroline has" -> "I have".
_AGREEING = {"is": "am", "has": "have", "was": "was", "does": "do"}
_THEIRS = re.compile(r"\b(?:her|his|their)\b", re.IGNORECASE)
_THEY = re.compile(r"\b(?:she|he)\b", re.IGNORECASE)


def in_persons_voice(question: str, name: str, other: str) -> str:
    """A question about `name` as they would ask it themselves: "When did Caroline go to the
    support group?" -> "When did I go to the support group?"; "What is Caroline's identity?"
    -> "What is my identity?". Their pronouns become "my" and "I" when the question names no
    one else (`other`, the other speaker), where they can only mean the person."""
    name_re = re.escape(name)
    text = re.sub(rf"\b{name_re}['\u2019]s\b", "my", question)
    asking = "|".join(_ASKING)
    text = re.sub(
        rf"\b({asking})\s+{name_re}\b",
        lambda m: f"{_keep_case(m.group(1), _ASKING[m.group(1).lower()])} I",
        text,
        flags=re.IGNORECASE,
    )
    agreeing = "|".join(_AGREEING)
    text = re.sub(rf"\b{name_re}\s+({agreeing})\b", lambda m: f"I {_AGREEING[m.group(1).lower()]}", text)
    text = re.sub(rf"\b{name_re}\s+and\s+", "I and ", text)
    # "What Jon thinks" -> "What I think".
    text = re.sub(rf"\b{name_re}\s+([a-z]+[^s\W])s\b", r"I \1", text)
    text = re.sub(rf"^{name_re}\b", "I", text)
    text = re.sub(rf"\b{name_re}\b", "me", text)
    if other not in text:
        text = _THEIRS.sub("my", text)
        text = _THEY.sub("I", text)
    return text


def _keep_case(original: str, word: str) -> str:
    return word.capitalize() if original[:1].isupper() else word
