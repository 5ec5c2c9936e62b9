"""The simulated users: who talks to the runtime, turn by turn.

    base       the contract (`UserBackend`, `UserSession`: one async call per turn, and the
               members a paid backend adds, stated by a free one with their defaults) and
               `make_user(spec)`, which picks a backend
    scripted   the scripted user: deterministic, offline and free, the default
    manners    how a persona's manner changes what the scripted user writes
    asked      which arguments a reply asks for in words (a runtime with no asks as data)
    model      a user played by a model, paid for under a hard budget, with a replay cache
    prompt     what a model-played user is told, and how its answer is read
    providers  the model APIs through their official SDKs (OpenAI and compatible, Anthropic),
               and what a model user asks of one (`Provider`)

Imports: `scoring` (personas, goals, transcripts, the judge's reading of a turn) and the rest of
`simulator` (ledger, limits, pricing, retry); the model SDKs only when such a backend is made.
"""
