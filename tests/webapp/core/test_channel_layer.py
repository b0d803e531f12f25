"""The Redis channel layer behind the live run page."""

from __future__ import annotations

import asyncio

from channels.layers import get_channel_layer


async def test_an_idle_channel_survives_longer_than_the_layers_blocking_read():
    # channels_redis waits 5 s per blocking read; redis-py 8's default 5 s socket timeout made
    # every quiet WebSocket crash and reconnect. A receive must simply keep waiting.
    layer = get_channel_layer()
    channel = await layer.new_channel()

    waited = asyncio.wait_for(layer.receive(channel), timeout=7)
    try:
        await waited
        raise AssertionError("nothing was sent, yet a message arrived")
    except TimeoutError:
        pass  # still waiting after 7 s: the connection did not time out underneath


async def test_a_message_sent_after_a_quiet_spell_is_delivered():
    layer = get_channel_layer()
    channel = await layer.new_channel()

    async def send_later():
        await asyncio.sleep(6)
        await layer.send(channel, {"type": "run.event", "event": {"seq": 1}})

    sender = asyncio.create_task(send_later())
    message = await asyncio.wait_for(layer.receive(channel), timeout=10)
    await sender
    assert message["event"] == {"seq": 1}
