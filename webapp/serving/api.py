"""``POST /api/agents/{id}/act``: a trained agent's deterministic action for an observation
batch or a market state (see ``trainer/serving/`` for the bodies and answers)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.core.errors import AppError
from webapp.serving import services
from webapp.serving.auth import CachedTokenAuthentication, ServeTokenAuthentication, TokenAuth


class AgentActView(APIView):
    """Only the agent's owner may call it: with the session, the account token or a serve token
    (``srv_...``, which may be limited to one agent). Rate-limited per token (429 + Retry-After).

    With a token, a request reads no database row once the token and the agent are cached
    (``webapp/serving/cache.py``): one Redis round trip for the token, the rate limit and the
    agent (``services.act_preflight``), one for the call counters."""

    authentication_classes = [ServeTokenAuthentication, CachedTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Act with a trained agent",
        description=(
            'Body: `{"observations": [[...], ...]}` (B x obs_dim raw observations), '
            '`{"date": "YYYY-MM-DD"}` (a day of the agent\'s dataset; for an intraday agent also '
            '`"YYYY-MM-DD HH:MM"`, the bar ending then in exchange time, a bare day meaning its last bar) '
            'or `{"bars": {ticker: [{date, open, high, '
            "low, close, volume}, ...]}}` (recent daily bars of every ticker, oldest first, at least 252 days: "
            "the observation then matches the date path's within 1e-3), the last two with "
            "optional `cash` (USD) and `holdings` ({ticker: shares}), or for a portfolio agent either those "
            '(fractional shares allowed) or `weights` ({ticker: w, ..., "cash": w}); neither is a fresh start, '
            "all in cash. Answers the deterministic action(s); a stock-trading agent's market state also the "
            "orders per ticker under the env's trade rule, prices and the observation; a portfolio agent's its "
            "target weights, the weights after its no-trade band (rebalanced_weights) and, given cash and "
            "holdings or neither (the fresh start), its value, the orders and costs (not given weights). "
            "A date among the dataset's first 63 (warm-up) days adds a "
            "`warnings` list (refused with 400 naming date when it is outside the agent's train split). "
            "Errors are 400s naming the field; more than PADDOCK_SERVE_RATE_LIMIT calls a minute per token is 429."
        ),
        request={"application/json": dict},
        responses={200: OpenApiResponse(description="actions or action + orders"), 400: None, 404: None, 429: None},
        examples=[OpenApiExample("one observation", value={"observations": [[0.0, 0.1, 0.2]]}, request_only=True)],
    )
    def post(self, request, agent_id: int):
        auth = request.auth if isinstance(request.auth, TokenAuth) else None
        credential = auth.credential if auth is not None else None
        if credential is not None and credential.agent_id is not None and credential.agent_id != agent_id:
            raise AppError(f"this serve token may only call agent #{credential.agent_id}", status=403)
        preflight = (
            auth.preflight
            if auth is not None
            else services.act_preflight(identity=services.user_identity(request.user), agent_id=agent_id)
        )
        if preflight.retry_after is not None:
            return Response(
                {"error": "rate limit exceeded: too many act requests this minute", "fields": {}},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
                headers={"Retry-After": str(preflight.retry_after)},
            )
        entry = services.agent_entry(user=request.user, agent_id=agent_id, cached=preflight.entry)
        if entry is None:
            raise AppError("agent not found", status=404)
        return Response(services.agent_act(entry=entry, body=request.data, credential=credential))
