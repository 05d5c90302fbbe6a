"""The VAPID key's first use: cryptography is imported and the key pair made on a worker thread,
so the event loop keeps serving every stream and request meanwhile (core/notify/push.py)."""

from __future__ import annotations

from tests.loop_turns import in_fresh_interpreter

# In a fresh interpreter: in this one cryptography may be imported already.
FIRST_KEY = """
    import asyncio
    import sys
    import tempfile
    from pathlib import Path

    from c2.core.notify.push import KEY_FILE, PushService
    from tests.loop_turns import turns_during

    assert "cryptography" not in sys.modules and "py_vapid" not in sys.modules, "imported"


    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            service = PushService(None, home)  # the store is not used for the key
            key, turns = await turns_during(service.public_key())
            again = await PushService(None, home).public_key()
            print(turns, key == again, (home / KEY_FILE).is_file())


    asyncio.run(main())
    """


def test_the_first_vapid_key_is_made_while_the_loop_runs():
    """While the first `public_key()` imports cryptography (~0.1 s) and makes the key pair,
    other tasks on the loop keep running; the key is kept in the home, and a service started
    later gives the same one. (Done on the loop, as before, no other task ran: 0 turns.)"""
    during, same, kept = in_fresh_interpreter(FIRST_KEY).split()
    assert int(during) > 0, "the loop ran nothing while the key was made"
    assert (same, kept) == ("True", "True")
