"""The package's Spark app with the mutations of ``batch_mutations.py`` (named in AKO_TEST_MUTATIONS) done to
its staged files between its write and its proof: what spark-submit runs for the proof's tests. The app file
is the installed package's (AKO_TEST_APP_FILE), loaded as spark-submit runs it: its modules those shipped
with --py-files."""

from __future__ import annotations

import os
import sys

sys.path.append(os.path.dirname(os.environ["AKO_TEST_APP_FILE"]))  # after the --py-files: only the app's file

import batch_mutations  # beside this file (the script's directory is first on the driver's path)
import kafka_range_batch as app

write_staged = app.write_staged


def write_then_mutate(records, job):
    written = write_staged(records, job)
    batch_mutations.mutate(job, os.environ["AKO_TEST_MUTATIONS"].split(","))
    return written


app.write_staged = write_then_mutate

if __name__ == "__main__":
    sys.exit(app.main())
