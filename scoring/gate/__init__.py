"""Verdicts people act on: the merge gate against a baseline, and the release check.

    run_verdict a run's verdict, computed once: guarantees, release criteria and the gate
    verdict_lines what a verdict is made of: its status, and each line's kind, classes, scope, figures
    verdict_text  that verdict as Markdown, JUnit XML and JSON, from its records
    compare     gate_verdict(baseline, candidate, settings): the only place a gate verdict is made
    sharing     the cells a candidate shares with its baseline by content, and those new or removed
    verdict     what a verdict holds: per class, per slice, what moved and what flipped
    summary     per-cell counts of every class: the only thing the gate compares
    baseline    the blessed baseline file: written, read from a file or from git, checked
    stats       the permutation test over cells and slices, and its power
    joint       reassigning whole conversations between the runs, every class at once
    text        a verdict as text: the console, Markdown and JUnit XML
    formats     how rates, differences and p-values are written
    release     what a run must meet, beyond its guarantees, to be released
    competence  how competent a user model is (`simrun check-user`)

Imports: the shared vocabulary of `scoring`, `simrun.scoring.dataset`, the judge and the store; never
the pages, which show the verdicts made here.
"""
