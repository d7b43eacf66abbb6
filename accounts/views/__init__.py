"""The account pages: the memory page (memories.py), the account page (account.py) and
the first-login questions (onboarding.py)."""
