"""The leaderboard read as a whole: how many of its agents score above their untrained policy
by more than the noise of their validation sub-windows, on the run page (first paint) and in
the live snapshot, and a sentence that says when none can be told apart from it."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from webapp.runs.models import Agent
from webapp.runs.selectors import baselines
from webapp.runs.selectors.payloads import leaderboard, run_snapshot

pytestmark = pytest.mark.django_db


def _row(score, untrained, noise, note=""):
    return {"score": score, "untrained": untrained, "noise": noise, "note": note}


def test_the_verdict_counts_agents_above_the_untrained_policy_by_more_than_the_noise():
    none_above = baselines.leaderboard_verdict([_row(0.2, 0.1, 0.5), _row(-0.1, -0.3, 0.25), _row(-0.5, 0.1, 0.3)])
    assert (none_above["judged"], none_above["above_noise"]) == (3, 0)
    assert none_above["text"].startswith("None of the 3 leaderboard agents") and "no better" in none_above["text"]
    # 0.9 - 0.1 > 0.5 counts; a short window, a missing noise or untrained score is not judged
    rows = [_row(0.9, 0.1, 0.5), _row(0.2, 0.1, 0.5), _row(2.0, 0.0, 0.1, note="n/a (window shorter than 63 days)")]
    rows += [_row(1.0, None, 0.1), _row(1.0, 0.0, None)]
    some = baselines.leaderboard_verdict(rows)
    assert (some["judged"], some["above_noise"]) == (2, 1) and some["text"].startswith("1 of 2 leaderboard agents")
    empty = baselines.leaderboard_verdict([])
    assert (empty["judged"], empty["above_noise"], empty["text"]) == (0, 0, "")
    assert empty["vs_equal_weight"]["cost_free"] == {"beats": 0, "trails": 0, "indistinguishable": 0}


def test_the_verdict_counts_agents_that_beat_or_trail_each_one_over_n():
    def row(free, fair):
        return {"vs_equal_weight": {"verdict": free}, "vs_equal_weight_with_costs": {"verdict": fair}}

    rows = [row("beats", "indistinguishable"), row("trails", "trails"), row("indistinguishable", "beats")]
    against = baselines.leaderboard_verdict(rows)["vs_equal_weight"]
    assert against["cost_free"] == {"beats": 1, "trails": 1, "indistinguishable": 1}
    assert against["with_costs"] == {"beats": 1, "trails": 1, "indistinguishable": 1}
    assert against["text"].startswith(
        "Against 1/N on the same validation days (95 % interval of the Sharpe difference): "
    )
    assert (
        "1 of 3 beat the cost-free 1/N, 1 trail it; 1 beat 1/N traded with the task's costs, 1 trail it"
        in against["text"]
    )
    # a short validation window has no interval to judge by
    assert baselines.equal_weight_verdicts([{**rows[0], "note": "n/a (window shorter than 63 days)"}])["text"] == ""


def test_the_run_page_and_the_snapshot_show_the_same_verdict(client, user, world):
    client.force_login(user)
    board = [baselines.agent_baselines(a) for a in leaderboard(world.run)]
    judged = [b for b in board if b["noise"] is not None and b["untrained"] is not None and not b["note"]]
    above = sum(1 for b in judged if b["score"] - b["untrained"] > b["noise"])
    assert len(judged) == 3  # the real trained generation's metrics carry sub-windows and an untrained score

    page = BeautifulSoup(client.get(f"/runs/{world.run.pk}/").content, "html.parser")
    verdict = page.select_one("#leaderboard-verdict")
    assert (verdict["data-judged"], verdict["data-above-noise"]) == (str(len(judged)), str(above))
    assert not verdict.has_attr("hidden")
    snapshot = run_snapshot(world.run)
    assert snapshot["verdict"]["text"] == verdict.get_text(strip=True)
    assert (snapshot["verdict"]["judged"], snapshot["verdict"]["above_noise"]) == (len(judged), above)

    # an agent far above its untrained policy is counted at once
    best = leaderboard(world.run)[0]
    untrained = Agent.objects.get(pk=best.pk).metrics["untrained"]["score"]
    Agent.objects.filter(pk=best.pk).update(score=untrained + 100.0)
    after = run_snapshot(world.run)["verdict"]
    assert after["above_noise"] == above + (0 if board[0]["score"] - board[0]["untrained"] > board[0]["noise"] else 1)
