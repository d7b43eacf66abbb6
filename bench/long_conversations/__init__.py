"""The LoCoMo benchmark's parts (bin/bench locomo): the dataset's format, a conversation
played into the app through its services, and what reached the coach for each question."""
