"""An agent pays a metered (x402 ``upto``) URL: it asks first, then pays only what it used."""

import os

import svc

agent = svc.Client(wallet_key=os.environ["SVC_WALLET_KEY"])
url = os.environ["METERED_URL"]  # answers 402 with an x402 `upto` offer: at most 0.50

quote = agent.spend.pay_url_quote(url)
print(quote.metered, quote.max_amount, quote.allowed)  # True 0.50 True: the most it can cost

paid = agent.spend.pay_url(url)
print(paid.amount, "of at most", paid.max_amount)  # 0.137 of at most 0.50: what it used
print(agent.spend.balance().spent_this_period)  # 0.137: the allowance counts only that
