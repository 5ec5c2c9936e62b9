"""The command line: `simrun` and its commands, a thin shell over `simulator` and `scoring`.

    main        the `simrun` app, its commands registered in order, and `main()`, the console script
    common      what the commands share: the console, one-line errors, the common options
    tables      rows of a table that fit 100 columns (runs, plan)
    run         plain `simrun` (and `run`), `resume`
    project     validate, check-runtime, plan, schema: a project checked before a run
    runs        runs, report, dashboard, show, merge: stored runs read back
    gate        baseline, gate, rescore, export, import: runs compared and moved
    check_user  check-user: a user model measured where the answer is known

Imports: anything in `simulator` and `scoring`; nothing imports the command line. A command
parses its options and calls a library function a Python user could call too.
"""
