"""A webhook receiver in Flask.

Run it from docs/examples, with the endpoint's signing secret:

    SVC_WEBHOOK_SECRET=whsec_... flask --app "receiver_flask:app_from_env()" run
"""

import os
from collections.abc import Sequence

from credit_store import CreditStore
from flask import Flask, Response, jsonify, request

from svc import webhooks


def create_app(signing_secrets: Sequence[str], store: CreditStore) -> Flask:
    app = Flask(__name__)

    @app.post("/svc/webhooks")
    def svc_webhook() -> Response | tuple[Response, int]:
        body = request.get_data()  # the raw bytes: never request.get_json()
        try:
            event = webhooks.verify(signing_secrets, body, request.headers)
        except webhooks.WebhookVerificationError as exc:
            return jsonify(error=exc.message), 400
        response = Response(status=204)
        if not store.seen(event.id):  # else a retry of an event handled already
            # Runs when the WSGI server has sent the response.  Slow work belongs on a
            # queue (Celery, RQ...), so as not to hold this worker.
            response.call_on_close(lambda: store.handle(event))
        return response

    return app


def app_from_env() -> Flask:
    # While rotating, list the new secret and the old one: see "Rotating the secret".
    return create_app([os.environ["SVC_WEBHOOK_SECRET"]], CreditStore())
