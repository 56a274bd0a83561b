"""``svc listen``: forward the owner's Test events to a local receiver, as ``stripe
listen`` does.  A listener endpoint is registered; its deliveries are long-polled, posted
to the local URL with their original body and signature headers (nothing is re-signed, so
the receiver verifies them with the secret printed at start), acknowledged with the local
answer (the delivery log records it; a failure is retried as usual), and the endpoint is
deleted on exit.

A quiet connection is told from a dead one by the poll itself: the service answers an
empty poll when its wait is up (a heartbeat every ``POLL_WAIT`` seconds, which nothing is
printed for), so a poll that is not answered within ``POLL_WAIT + 15`` seconds, or fails to
connect, means the service is gone.  The CLI says so once and retries with backoff (1 s
doubling to 30 s), as ``stripe listen`` reconnects, and says when it is back; a listener
that is gone when it comes back (deleted, or swept after some minutes without a poll) ends
it with :class:`ListenerGone`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import httpx

from ._client import Client
from ._errors import APIConnectionError, NotFoundError, ServerError, SvcError
from ._models import ListenBatch, ListenedDelivery
from ._options import RequestOptions

__all__ = ["ListenerGone", "listen"]

#: How long one poll waits on the service for a delivery (seconds).
POLL_WAIT = 25.0
#: The first and the longest pause before polling again after a lost connection (seconds).
RETRY_FIRST = 1.0
RETRY_MOST = 30.0


class ListenerGone(SvcError):
    """The listener endpoint no longer exists (deleted, or swept as abandoned while the
    service could not be reached): ``svc listen`` must be run again."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message, request_id=request_id)


def listen(
    client: Client,
    forward_to: str,
    *,
    events: Sequence[str] | None,
    say: Callable[[str], None],
    stop: threading.Event,
    wait: float = POLL_WAIT,
    warn: Callable[[str], None] | None = None,
) -> None:
    """Forward until ``stop`` is set (or interrupted); the endpoint is deleted on the way
    out, whatever ended the loop.  ``warn`` (stderr) hears of a lost connection and of its
    return; :class:`ListenerGone` when the endpoint is gone."""
    created = client.webhooks.listen(events=events)
    try:
        say(f"Ready! Your webhook signing secret is {created.signing_secret} ({created.id})")
        polls = _Polls(client, created.id, wait, warn or say, stop)
        with httpx.Client(timeout=30.0) as local:
            while not stop.is_set():
                batch = polls.next()
                for delivery in batch.data:
                    status, error = _forward(local, forward_to, delivery)
                    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
                    shown = f"[{status}]" if error is None else f"[error: {error}]"
                    say(f"{when}  {delivery.event_type}  {delivery.event_id}  -> {shown}")
                    client.webhooks.ack(
                        created.id,
                        delivery_id=delivery.delivery_id,
                        status_code=status,
                        error=error,
                    )
    finally:
        with contextlib.suppress(SvcError):  # gone already, or the service is unreachable
            client.webhooks.delete(created.id)


class _Polls:
    """The listener's polls, through lost connections (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        endpoint_id: str,
        wait: float,
        warn: Callable[[str], None],
        stop: threading.Event,
    ) -> None:
        self.client, self.endpoint_id, self.wait = client, endpoint_id, wait
        self.warn, self.stop = warn, stop
        # No answer this long after the service's own wait is up: the connection is dead.
        self.options = RequestOptions(timeout=wait + 15, max_retries=0)

    def next(self) -> ListenBatch:
        """The next batch (empty: a heartbeat, or ``stop`` was set while retrying)."""
        pause = RETRY_FIRST
        lost = False
        while True:
            try:
                batch = self.client.webhooks.poll(
                    self.endpoint_id, wait=self.wait, options=self.options
                )
            except NotFoundError as exc:
                raise ListenerGone(
                    f"the listener endpoint {self.endpoint_id} is gone (deleted, or removed "
                    "after 10 minutes without a poll); run svc listen again",
                    request_id=exc.request_id,
                ) from None
            except (APIConnectionError, ServerError) as exc:
                self.warn(
                    f"lost the connection to the service ({exc}); retrying in {pause:g}s"
                    if not lost
                    else f"still no answer from the service; retrying in {pause:g}s"
                )
                lost = True
                if self.stop.wait(pause):
                    return ListenBatch(data=[])
                pause = min(pause * 2, RETRY_MOST)
                continue
            if lost:
                self.warn("reconnected; listening again")
            return batch


def _forward(
    local: httpx.Client, url: str, delivery: ListenedDelivery
) -> tuple[int | None, str | None]:
    """POST the delivery as the outbox would have; the status, or why there is none."""
    try:
        response = local.post(url, content=delivery.body.encode(), headers=delivery.headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]
    return response.status_code, None
