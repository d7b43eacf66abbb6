"""Bringing in what another assistant knows about a person: its answer, pasted, split into
proposed memories the person reviews, then saved as their own.

- `splitting`: the paste cleaned and split into proposals, by the model where its answer
  is usable, else line by line (`paste_splitter`, which the offline coach answers with too).
- `review`: what the person sees before saving: the proposals, those they already have,
  and what saving them all would do to a full store.
- `saving`: the ticked proposals, as the person edited them, saved as their own.

Nothing is stored between the paste and the save: the proposals travel in the review
form, and only what the person ticks becomes a memory.
"""
