"""The approver CLI, the `expenses` console script: request, inbox, approve, reject, withdraw, deliver, settle,
show, migrate.

    entry.py     the arguments, the desk, one clear line for anything refused (`expenses --help`)
    commands.py  what each command does, on the desk it is handed
    render.py    what each command prints
"""
