"""A person in crisis is not coached. When someone speaks of harming themselves or others,
of a medical emergency or of abuse, the demo stops coaching, answers with care and points
to help, and saves nothing of it (unless the person asks it to be remembered)."""

from __future__ import annotations

import re
from collections.abc import Sequence

SELF_HARM, HARM_TO_OTHERS, EMERGENCY, ABUSE = "self-harm", "harm to others", "emergency", "abuse"
SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            SELF_HARM,
            r"\b(?:kill(?:ing)? myself|end(?:ing)? (?:it all|my (?:own )?life)|suicid|self[- ]harm"
            r"|harm(?:ing)? myself|hurt(?:ing)? myself|cut(?:ting)? myself"
            r"|(?:want|wanted|wish) (?:to die|i (?:was|were) dead)"
            r"|(?:don't|do not) want to (?:live|be alive|be here|wake up)|no reason to (?:live|go on)"
            r"|better off without me|take my (?:own )?life)",
        ),
        (
            HARM_TO_OTHERS,
            r"\b(?:(?:want|going|tempted) to (?:hurt|kill|harm|attack) (?:him|her|them|someone|somebody|people)"
            r"|(?:hurt|kill|harm) (?:someone|somebody|people|my (?:partner|wife|husband|kids?|child|boss)))\b",
        ),
        (
            EMERGENCY,
            r"\b(?:chest pains?|can(?:no|')t breathe|struggling to breathe|heart attack|having a stroke|collapsed"
            r"|unconscious|anaphyla\w*|throat (?:is )?(?:closing|swelling)|seizure|overdos\w*|bleeding heavily"
            r"|severe bleeding|passed out)\b",
        ),
        (
            ABUSE,
            r"\b(?:abus\w*|(?:hits|beats|chokes|hurts|threatens) me|hit me again|domestic violence"
            r"|(?:afraid|scared) of my (?:partner|husband|wife|boyfriend|girlfriend|dad|father|mum|mother)"
            r"|forced me|not safe at home)\b",
        ),
    )
)
# Asked outright to keep it: then, and only then, it is noted.
ASKED_TO_REMEMBER = re.compile(r"\b(?:please )?(?:remember|note|save|keep in mind) (?:this|that|it)\b", re.IGNORECASE)

FIRST_WORDS = {
    SELF_HARM: "I'm really sorry you're feeling this way, and I'm glad you told me.",
    HARM_TO_OTHERS: "Thank you for telling me. It sounds like things feel out of control right now.",
    EMERGENCY: "This sounds like it could be a medical emergency.",
    ABUSE: "I'm so sorry this is happening to you. It is not your fault.",
}
NEXT_WORDS = {
    SELF_HARM: "If you might act on these thoughts, call your local emergency number now (112 across Europe, "
    "911 in the US and Canada, 999 in the UK), or reach a crisis line, which you can call or text any time.",
    HARM_TO_OTHERS: "Please put some distance between yourself and the person, and call your local emergency "
    "number (112 across Europe, 911 in the US and Canada, 999 in the UK) or a crisis line if you might act on it.",
    EMERGENCY: "Please call your local emergency number now (112 across Europe, 911 in the US and Canada, 999 in "
    "the UK), or ask someone near you to call, and stop any exercise.",
    ABUSE: "If you are in danger right now, call your local emergency number (112 across Europe, 911 in the US "
    "and Canada, 999 in the UK). A domestic abuse or crisis line can help you plan to be safe, in confidence.",
}
CLOSING = (
    "I'm a demo coach, not a crisis service, so I'll stop coaching here: the help page lists where to find a "
    "crisis line in your country. Is there someone you trust who can be with you now?"
)


def crisis_in(text: str) -> str | None:
    """The kind of crisis `text` speaks of, if it speaks of one."""
    return next((kind for kind, signs in SIGNS if signs.search(text)), None)


def asks_to_remember(text: str) -> bool:
    """Whether the person asks outright for what they said to be kept."""
    return bool(ASKED_TO_REMEMBER.search(text))


HELP_NOW = "Please call your local emergency number now, or a crisis line: you deserve help with this right away."
SENTENCE = re.compile(r"[^.!?\n]+[.!?]")
# Said again in the same conversation: the help as plainly, in other words around it.
AGAIN = (
    "I'm still here with you. If you are in danger, please call your local emergency number right away; "
    "a crisis line can talk it through with you at any hour. Are you somewhere safe right now?",
    "Thank you for telling me more. Your safety comes first: your local emergency number (112, 911 or 999) "
    "is the quickest help, and the help page lists a crisis line for your country. Who could you reach today?",
    "I hear you. Please reach out now: your local emergency number if you are in danger, or a crisis line to "
    "talk to someone. Would it help to tell someone near you what's happening?",
)


def crisis_reply(kind: str, earlier_replies: Sequence[str] = ()) -> str:
    """Care, where to find help now, and no coaching; in other words each time it is said
    again in a conversation, the way to help in every one."""
    care = f"{FIRST_WORDS[kind]} {NEXT_WORDS[kind]}"
    for reply in (f"{care}\n\n{CLOSING}", care, *AGAIN):
        said = [part for part in SENTENCE.findall(reply) if "emergency number" not in part]
        if not any(part in earlier for part in said for earlier in earlier_replies):
            return reply
    # Where to find help is said as often as it is needed, if nothing else is left to say.
    return HELP_NOW
