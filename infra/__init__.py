"""The platform every app stands on, and which knows none of them.

Topic-named modules: the language model gateway (`llm`), text encrypted at rest
(`encryption`), prompt files (`prompts`), reading settings from the environment
(`environment`), database steps from async code (`dbsteps`), token estimates (`tokens`),
service health (`health`) and development mail (`console_mail`). Nothing here imports
`coach`, `memory`, `emails` or `accounts`; the import contract in pyproject.toml checks it.
"""
