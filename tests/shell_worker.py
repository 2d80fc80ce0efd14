"""A long-lived `manage.py shell -c`: one Django process per data directory and settings that runs snippets.

Started by `tests.live.run_snippet` (`python -m tests.shell_worker`, with the data directory's environment). It
reads one JSON line per snippet on stdin, runs it as `shell -c` would (the same globals and auto-imports), and
answers one JSON line: what it printed, and the traceback when it raised. After each snippet it closes its
database connections, so that it holds no lock and no connection between snippets, as a finished process would.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management.commands import shell
    from django.db import connections

    namespace = {**vars(shell), **shell.Command().get_namespace(verbosity=0)}
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in sys.stdin:
        code = json.loads(line)["code"]
        out, err = io.StringIO(), io.StringIO()
        failure = None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(compile(code, "<snippet>", "exec"), dict(namespace))  # noqa: S102  (the test's own code)
            except BaseException:  # noqa: BLE001  (reported to the test, which raises it)
                failure = traceback.format_exc()
            finally:
                connections.close_all()
        answers.write(json.dumps({"stdout": out.getvalue(), "stderr": err.getvalue(), "failure": failure}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
