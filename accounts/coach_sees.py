"""The page "what your coach sees", in the person's words: the memory block the next turn would
send, topic by topic, each memory in the form it took (in full, one line, left out) and
who it came from. Pure: built from the context assembly's report, never querying."""

from __future__ import annotations

from dataclasses import dataclass

from memory.context import LEFT_OUT, LINE, WHOLE, ContextItem, MemoryContext
from memory.models import Memory, Source

CONTEXT_FORMS = {
    WHOLE: "In full",
    LINE: "One line",
    LEFT_OUT: "Left out for lack of room",
}
# Who a memory came from, as the person reads it on "what your coach sees". The prompt
# tells the model its own notes are by "you"; to the person, "you" is themselves.
CONTEXT_SOURCES: dict[str, str] = {
    Source.USER: "you told your coach",
    Source.ONBOARDING: "from onboarding",
    Source.MANUAL: "you edited or kept it",
    Source.COACH: "your coach's note",
    Source.ADMIN: "added by our support team",
}
# The prompt's topics, as headings a person reads, in the prompt's own order.
CONTEXT_TOPICS = {
    "injury": "Injuries",
    "allergy": "Allergies",
    "medical": "Health",
    "safety": "Safety",
    "constraint": "Limits",
    "background": "About you",
    "preference": "What you prefer",
    "goal": "Goals",
    "habit": "Habits",
    "schedule": "Your schedule",
    "feedback": "How you like to be coached",
    "project": "Projects",
    "reference": "References",
    "episode": "Weekly summaries",
    "other": "Other",
    "emails": "Emails your coach sent you lately",
}
# The relationship stage (memory.context.STAGES), as the person would put it.
CONTEXT_STAGES = {
    "new": "Your coach is getting to know you: it listens more than it coaches, and notes the basics you tell it.",
    "developing": "Your coach tailors its suggestions to you and refers back to earlier conversations.",
    "established": "Your coach knows you well: it is direct, notices patterns across sessions and gently names "
    "what you avoid.",
}


@dataclass(frozen=True)
class ContextEntry:
    """One memory or email as the coach reads it, in the person's words."""

    item: ContextItem
    form: str
    source: str
    # The memory itself (its details and date), when the item is one.
    memory: Memory | None = None

    @property
    def in_full(self) -> bool:
        return self.item.form == WHOLE

    @property
    def left_out(self) -> bool:
        return self.item.form == LEFT_OUT

    @property
    def shows_content(self) -> bool:
        return self.memory is not None and self.memory.content.strip() != self.memory.summary.strip()


@dataclass(frozen=True)
class ContextSection:
    """One topic of the prompt's memory block, in the order the coach reads them."""

    topic: str
    heading: str
    entries: tuple[ContextEntry, ...]


@dataclass(frozen=True)
class ContextReport:
    """What the next turn would send of the person's memory, and the form each memory took."""

    context: MemoryContext
    # The person's memories by id, for what an item shows beyond its one line.
    memories: dict[int, Memory]

    @property
    def memory_used(self) -> bool:
        return self.context.used

    @property
    def dropped(self) -> tuple[ContextItem, ...]:
        return self.context.dropped

    @property
    def whole(self) -> int:
        return sum(1 for item in self.context.items if item.form == WHOLE)

    @property
    def as_lines(self) -> int:
        return sum(1 for item in self.context.items if item.form == LINE)

    @property
    def stage_says(self) -> str:
        return CONTEXT_STAGES.get(self.context.stage, "")

    @property
    def sections(self) -> tuple[ContextSection, ...]:
        sections: list[ContextSection] = []
        entries: list[ContextEntry] = []
        for index, item in enumerate(self.context.items):
            entries.append(self._entry(item))
            following = self.context.items[index + 1] if index + 1 < len(self.context.items) else None
            if following is None or following.topic != item.topic:
                heading = CONTEXT_TOPICS.get(item.topic, item.topic.capitalize())
                sections.append(ContextSection(topic=item.topic, heading=heading, entries=tuple(entries)))
                entries = []
        return tuple(sections)

    def _entry(self, item: ContextItem) -> ContextEntry:
        memory = self.memories.get(item.memory_id) if item.memory_id is not None else None
        if item.kind == "email":
            return ContextEntry(item=item, form=CONTEXT_FORMS[item.form], source="an email your coach sent you")
        return ContextEntry(
            item=item,
            form=CONTEXT_FORMS[item.form],
            source=CONTEXT_SOURCES.get(item.source, "your coach's note"),
            memory=memory,
        )
