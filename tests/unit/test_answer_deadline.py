"""The worker's own deadline on an answer: a blocked read on a connection whose peer keeps the link up but
never answers ends when the deadline shuts the socket, and an answer in time is never cut."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from airflow_kafka_offsets.core.timeouts import LedgerTimeouts
from airflow_kafka_offsets.errors import ConfigurationError
from airflow_kafka_offsets.ledger.answer_deadline import AnswerDeadlineExpired, Watchdog, answer_within


class SocketConnection:
    """A connection as the ledger sees one: a socket the driver reads its answer from (``fileno``)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def answer(self) -> bytes:
        data = self.sock.recv(16)
        if not data:
            raise ConnectionError("server closed the connection unexpectedly")
        return data


def test_a_peer_that_never_answers_is_cut_at_the_deadline_and_said_so() -> None:
    ours, silent_peer = socket.socketpair()  # the peer stays open: no TCP deadline would ever fire
    conn = SocketConnection(ours)
    started = time.monotonic()
    with pytest.raises(AnswerDeadlineExpired, match=r"after 0\.3 s without an answer") as raised:
        with answer_within(conn, 0.3):
            conn.answer()
    assert 0.25 < time.monotonic() - started < 3
    assert isinstance(raised.value.__cause__, ConnectionError)
    silent_peer.close()
    ours.close()


def test_an_answer_in_time_is_kept_and_the_socket_stays_usable() -> None:
    ours, peer = socket.socketpair()
    conn = SocketConnection(ours)
    threading.Timer(0.05, peer.sendall, (b"one",)).start()
    with answer_within(conn, 0.5):
        assert conn.answer() == b"one"
    time.sleep(0.6)  # past the deadline: disarmed, nothing is shut
    peer.sendall(b"two")
    assert conn.answer() == b"two"
    peer.close()
    ours.close()


def test_an_error_of_the_block_before_the_deadline_is_its_own() -> None:
    ours, peer = socket.socketpair()
    with pytest.raises(KeyError):
        with answer_within(SocketConnection(ours), 5):
            raise KeyError("not the deadline's")
    peer.close()
    ours.close()


def test_no_deadline_or_no_socket_waits_unbounded() -> None:
    class NoSocket:
        def fileno(self) -> int:
            raise AttributeError("fileno")

    with answer_within(NoSocket(), 0.01):
        time.sleep(0.05)
    with answer_within(object(), None):
        pass


def test_many_deadlines_fire_in_their_order_on_one_thread() -> None:
    watchdog = Watchdog()
    pairs = [socket.socketpair() for _ in range(3)]
    alarms = [watchdog.arm(seconds, ours.fileno()) for seconds, (ours, _) in zip((0.4, 0.1, 30), pairs, strict=True)]
    time.sleep(0.6)
    assert [watchdog.disarm(alarm) for alarm in alarms] == [True, True, False]
    assert [ours.recv(1) for ours, _ in pairs[:2]] == [b"", b""]  # shut: the end of the stream
    for ours, peer in pairs:
        ours.close()
        peer.close()


def test_the_deadlines_come_from_the_extra() -> None:
    default = LedgerTimeouts()
    assert (default.commit_deadline_s(), default.statement_deadline_s()) == (30.0, 330.0)
    short = LedgerTimeouts.from_extra({"answer_timeout": "2500", "statement_timeout": 90_000})
    assert (short.commit_deadline_s(), short.statement_deadline_s()) == (2.5, 92.5)
    assert LedgerTimeouts.from_extra({"answer_timeout": 0}).commit_deadline_s() is None
    assert LedgerTimeouts.from_extra({"statement_timeout": 0}).statement_deadline_s() is None
    with pytest.raises(ConfigurationError, match="ledger connection extra 'answer_timeout' is '2s'"):
        LedgerTimeouts.from_extra({"answer_timeout": "2s"})
