"""The transactional outbox's delivery side: claiming due deliveries, signing and sending
them SSRF-safely, recording every attempt, retrying on a schedule, and the worker loop
that runs inside ``svc-server run`` or alone as ``svc-server worker``."""

from .delivery import DeliveryOutcome, Job, claim_due, claim_one
from .worker import deliver_job_sync, run_worker

__all__ = [
    "DeliveryOutcome",
    "Job",
    "claim_due",
    "claim_one",
    "deliver_job_sync",
    "run_worker",
]
