"""The serve-tokens form answers bad input like the app's other forms: 400, the error next to
the field, the typed values kept; an over-long name is refused with its limit named."""

from __future__ import annotations

import pytest

from webapp.serving.models import ServeToken

pytestmark = pytest.mark.django_db

URL = "/account/serve-tokens/"


@pytest.mark.parametrize("agent", ["abc", "-1", "99999", "1.5"])
def test_a_bad_agent_is_a_400_next_to_the_field_with_the_typed_value_kept(client, user, agent):
    client.force_login(user)
    page = client.post(URL, {"name": "bot", "agent": agent})
    html = page.content.decode()
    assert page.status_code == 400
    assert 'id="error-agent"' in html
    assert f'value="{agent}"' in html and 'value="bot"' in html
    assert not ServeToken.objects.exists()


@pytest.mark.parametrize(("name", "says"), [("x" * 500, "at most 100 characters, got 500"), ("  ", "required")])
def test_a_name_too_long_or_blank_is_a_400_naming_the_limit(client, user, name, says):
    client.force_login(user)
    page = client.post(URL, {"name": name, "agent": ""})
    html = page.content.decode()
    assert page.status_code == 400
    assert 'id="error-name"' in html and says in html
    assert not ServeToken.objects.exists()


def test_a_good_token_is_still_a_200_showing_its_key(client, user):
    client.force_login(user)
    page = client.post(URL, {"name": "bot", "agent": ""})
    assert page.status_code == 200
    assert ServeToken.objects.get(owner=user).key in page.content.decode()
