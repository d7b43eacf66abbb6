"""A person played through the real app for months on a simulated clock: the parts of
`bin/bench lifetime` (the persona format, the clock, beat, the mailbox, the figures)."""
