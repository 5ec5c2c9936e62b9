"""The judge: every class and guarantee of CLASSES.md, as pure functions of the evidence.

    scorer          score(transcript, goal, persona) -> Scorecard: every check, one verdict each
    goal            was the goal reached? decided on the store's state
    progress        the ways a conversation stops moving forward (dead_end, loop, unanswered, ...)
    guarantees      what must never happen (wrong_record, phantom_receipt, integrity_leak, ...)
    stale           stale_click: what a click on an expired offer caused, in any later turn
    audit           audit_gap: every turn leaves its own turn event in the audit stream
    simulated_user  simulator_error: the simulated user broke its brief, kept apart
    offers          following an offer to the events it led to
    answers         does a reply carry a value from the store, in the words people write?
    evidence        reading turn results and store snapshots, absent fields kept absent
    goal_names      goals that name fields, types or operations no store held (the goal's problem)

Imports: the shared vocabulary of `simrun.scoring` and `simrun.scoring.dataset`, nothing else.
No I/O and no model calls: the judge imports neither the simulator, nor the store, the gate or
the pages, so a transcript scores the same wherever it is scored.
"""
