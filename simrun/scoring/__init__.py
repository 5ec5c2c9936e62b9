"""simrun's judgement: everything after a conversation, and what it is judged against.

Imports: each package below may import the ones above it in this list and simrun's base layer (the
modules of `simrun` itself: errors, settings, protocol, transcript, secrets, money, labels, ...),
never one below, and none imports the simulator, so that rescore, import and the workers of a
cluster can judge without it (`tests/test_layering.py` holds every rule here):

    simrun.scoring.dataset          personas and goals: the YAML models, loading, goal SQL, patterns
    simrun.scoring.checks           the judge: pure functions from a transcript to findings
    simrun.scoring.store            DuckDB: runs, conversations, turns, findings; rates; bundles
    simrun.scoring.gate             verdicts: the merge gate, baselines, statistics, release criteria
    simrun.scoring.pages            the HTML report and the dashboard

Each package's modules are private (`_name.py`); its `__init__` exports what the others use,
among them:

    simrun.scoring.checks.score(transcript, goal, persona) -> Scorecard   (pure; no I/O, no model)
    simrun.scoring.store.Store(path)          (DuckDB: runs, conversations, turns, findings)
    simrun.scoring.store.class_rates(store, run_id), outcome(store, run_id)
    simrun.scoring.gate.gate_verdict(baseline, candidate, settings) -> GateResult
    simrun.scoring.pages.build_report(store, run_id, out_dir) -> Path
    simrun.scoring.pages.build_dashboard(stores, out) -> Path   (every run, like with like)

A team's code uses the API above all of this (`import simrun`); these layers are importable, not
promised.
"""

if __name__ != "simrun.scoring":
    # One module name per file: the repository's top-level `scoring/` is a link to this folder,
    # and a second name would make every class here a second class (an error never caught).
    raise ImportError(f"this is simrun.scoring; import it as `simrun.scoring`, not `{__name__}`")
