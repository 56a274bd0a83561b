"""An agent streams a metered answer (server-sent events) as it is produced, then reads
what it was charged."""

import os

import svc

agent = svc.Client(wallet_key=os.environ["SVC_WALLET_KEY"])
url = os.environ["STREAMING_URL"]  # an x402 `upto` URL streaming 20 events, 0.001 each

with agent.spend.pay_url(url, stream=True) as paid:
    print(paid.head.status, paid.head.headers["content-type"])  # 200 text/event-stream; ...
    events = 0
    for chunk in paid:  # each chunk as the URL sent it, not the whole answer at the end
        events += chunk.count(b"\n\n")
print(events)  # 20
print(paid.result.amount, "of at most", paid.result.max_amount)  # 0.02 of at most 0.50
