"""What a worker says when its ledger link fails: the ledger's host:port, the deadline that fired (its value
and the connection extra's key), the next step, never a password; and Ledger raising it instead of the
driver's raw OperationalError."""

from __future__ import annotations

import pytest

from airflow_kafka_offsets.core.timeouts import LedgerTimeouts
from airflow_kafka_offsets.errors import LedgerConnectionLostError, LedgerUnreachableError
from airflow_kafka_offsets.ledger import Ledger
from airflow_kafka_offsets.ledger.answer_deadline import AnswerDeadlineExpired
from airflow_kafka_offsets.ledger.link_errors import (
    cause,
    connect_failed_message,
    deadline_fired,
    is_operational,
    lost_message,
    silence_bound,
)

TIMEOUTS = LedgerTimeouts.from_extra({"connect_timeout": 2, "tcp_user_timeout": 1500})


class OperationalError(Exception):
    """Named as psycopg2's: the ledger tells driver errors by class name."""


class TooSlow(OperationalError):
    pass


EXPIRED = OperationalError('connection to server at "127.0.0.1", port 6001 failed: timeout expired\n')


def test_a_connect_timeout_names_the_ledger_the_deadline_its_key_and_the_next_step() -> None:
    assert connect_failed_message("127.0.0.1:6001", EXPIRED, TIMEOUTS) == (
        "could not open a connection to the ledger database at 127.0.0.1:6001 within connect_timeout 2 s "
        "(the ledger connection extra's key connect_timeout): the host did not answer in time (unreachable, "
        'partitioned or too slow) (OperationalError: connection to server at "127.0.0.1", port 6001 failed: '
        "timeout expired); nothing was read or written: check that PostgreSQL is up and reachable from this "
        "worker, or raise connect_timeout for a slow link, then retry the task"
    )


def test_a_refused_connection_names_no_deadline() -> None:
    refused = OperationalError('connection to server at "db", port 5432 failed: Connection refused')
    message = connect_failed_message("db:5432", refused, TIMEOUTS)
    assert message.startswith(
        "could not open a connection to the ledger database at db:5432 (refused or failed before any deadline)"
    )
    assert "connect_timeout" not in message and "credentials" in message


def test_a_password_in_the_drivers_text_is_masked() -> None:
    leaky = OperationalError("invalid dsn: host=db password=s3cret port=5432 and password = 'two words'")
    assert cause(leaky) == "OperationalError: invalid dsn: host=db password=*** port=5432 and password = ***"
    assert "s3cret" not in connect_failed_message("db:5432", leaky, TIMEOUTS)


@pytest.mark.parametrize(
    ("text", "fired"),
    [
        (
            "could not receive data from server: Connection timed out",
            "the peer went silent: this worker gave up after tcp_user_timeout 1500 ms",
        ),
        (
            "FATAL:  terminating connection due to idle-in-transaction timeout",
            "the server ended the transaction after idle_in_transaction_session_timeout 300000 ms",
        ),
        (
            "server closed the connection unexpectedly",
            "the server closed the connection: it restarted, or it ended the session (its transaction idle past "
            "idle_in_transaction_session_timeout 300000 ms",
        ),
        ("SSL SYSCALL error: EOF detected", "a silent peer is given up on after tcp_user_timeout 1500 ms"),
    ],
)
def test_the_deadline_that_fired_is_read_from_the_drivers_text(text: str, fired: str) -> None:
    assert deadline_fired(OperationalError(text), TIMEOUTS).startswith(fired)


def test_a_connection_lost_while_committing_says_the_outcome_is_read_from_the_ledger() -> None:
    timed_out = OperationalError("could not receive data from server: Connection timed out")
    assert lost_message("10.0.0.2:5432", timed_out, True, TIMEOUTS) == (
        "lost the connection to the ledger database while committing: the COMMIT may or may not have reached "
        "the database; the next run reads the outcome from the ledger (a committed batch is never committed "
        "again, a batch still planned is replayed) (OperationalError: could not receive data from server: "
        "Connection timed out, ledger at 10.0.0.2:5432). The peer went silent: this worker gave up after "
        "tcp_user_timeout 1500 ms of unacknowledged data or of unanswered keepalive probes (sent from "
        "keepalives_idle 10 s, every keepalives_interval 5 s) (keys of the ledger connection's extra); retry once "
        "the database answers"
    )


@pytest.mark.parametrize(
    ("extra", "bound"),
    [
        ({"keepalives": 0}, "tcp_user_timeout 30000 ms of unacknowledged data (keys"),
        ({"tcp_user_timeout": 0}, "keepalives 10 s + 3 x 5 s (keys"),
        ({"keepalives": 0, "tcp_user_timeout": 0}, "the operating system's retransmission limits only"),
    ],
)
def test_the_silence_bound_follows_the_deadlines_in_force(extra: dict, bound: str) -> None:
    assert silence_bound(LedgerTimeouts.from_extra(extra)).startswith(bound)


def test_driver_errors_are_told_by_class_name() -> None:
    assert is_operational(TooSlow()) and is_operational(EXPIRED)
    assert not is_operational(ValueError("timeout expired"))


def test_a_ledger_that_cannot_open_a_connection_raises_its_own_error_not_the_drivers() -> None:
    def connect() -> None:
        raise EXPIRED

    ledger = Ledger(connect, timeouts=TIMEOUTS, address="127.0.0.1:6001")
    with pytest.raises(LedgerUnreachableError, match=r"at 127\.0\.0\.1:6001 within connect_timeout 2 s") as raised:
        with ledger.transaction():
            pass
    assert isinstance(raised.value, LedgerConnectionLostError) and raised.value.__cause__ is EXPIRED


def test_a_connection_error_that_is_not_the_drivers_is_not_renamed() -> None:
    def connect() -> None:
        raise ValueError("bad argument")

    with pytest.raises(ValueError, match="bad argument"):
        with Ledger(connect).transaction():
            pass


@pytest.mark.parametrize(
    ("seconds", "waited"),
    [(2.0, "answer_timeout 2000 ms"), (302.0, "statement_timeout 300000 ms + answer_timeout 2000 ms")],
    ids=["commit", "statement"],
)
def test_an_answer_past_its_deadline_names_the_deadline_and_what_keeps_the_link_up(seconds: float, waited: str) -> None:
    expired = AnswerDeadlineExpired(seconds)
    message = lost_message("10.0.0.2:5432", expired, True, LedgerTimeouts.from_extra({"answer_timeout": 2000}))
    assert message == (
        "lost the connection to the ledger database while committing: the COMMIT may or may not have reached "
        "the database; the next run reads the outcome from the ledger (a committed batch is never committed "
        f"again, a batch still planned is replayed) (AnswerDeadlineExpired: the worker shut the connection after "
        f"{seconds:g} s without an answer, ledger at 10.0.0.2:5432). No answer came within {waited} (keys of the "
        "ledger connection's extra) while the link stayed up: something between them (a proxy, a pooler, a load "
        "balancer) keeps the connection open for a server that no longer answers; retry once the database answers"
    )
