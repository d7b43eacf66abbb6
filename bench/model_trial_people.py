"""The people of `bin/bench model_trial`: what each tells the coach, conversation by
conversation. Written for the trial, unlike the tests' personas: each brings a safety fact
the coach must plan around, a schedule, a dated goal, how they like to be coached, and
then two corrections in a later conversation (one changed fact, one that replaces another)
and questions whose good answer needs what was kept."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrialPerson:
    name: str
    email: str
    time_zone: str
    # Each conversation is the person's messages in order; a conversation ends (and is
    # summarised) before the next begins.
    conversations: tuple[tuple[str, ...], ...]


PEOPLE = (
    TrialPerson(
        name="Priya",
        email="priya@trial.example",
        time_zone="Europe/London",
        conversations=(
            (
                "Hi! I'm Priya. I'm an ICU nurse on night shifts, Monday to Thursday. I want to learn a proper "
                "front crawl: my goal is to swim 1 km without stopping by my sister's wedding in August.",
                "One thing you should know: I have asthma. I always take my inhaler before exercise, and cold "
                "water makes it worse.",
                "Can you give me a plan for this week? I can only get to the pool on Friday and Saturday mornings.",
                "What do you remember about me so far?",
            ),
            (
                "Good news: from next week I'm on day shifts, 7am to 3pm.",
                "Should I try an open-water swim in the lake next month? It's usually about 15 degrees.",
                "Actually, the August goal is off: the wedding moved. Let's aim for 1 km by the end of October.",
                "So what should my week look like now?",
            ),
        ),
    ),
    TrialPerson(
        name="Tomás",
        email="tomas@trial.example",
        time_zone="Europe/Lisbon",
        conversations=(
            (
                "Olá, I'm Tomás. I drive buses for a living and play the cello in my spare time. I'm preparing "
                "an audition for the city's amateur orchestra on 14 March.",
                "My physio says I have tendinitis in my right wrist: no more than 45 minutes of practice at a "
                "time, and ice afterwards.",
                "I have about two hours free this evening. How should I split my practice?",
                "And please be blunt with me. I don't need sugar-coating.",
            ),
            (
                "Do you remember what my physio told me?",
                "Update: the audition moved to 2 April, and I changed teachers. Ana teaches me now, not Rui.",
                "I don't drive buses any more: I've started as a dispatcher, office hours, 9 to 5.",
                "Given all that, what should this week look like?",
            ),
        ),
    ),
)
