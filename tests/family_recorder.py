"""What a running test server's family is asked to render: shared by the API tests that check what reaches it."""

from __future__ import annotations


def recording_efforts(server, monkeypatch) -> list:
    """The reasoning effort of every conversation the server's family renders, in order."""
    family = server.app.state.service.family
    render, seen = family.render, []

    def recorded(conversation):
        seen.append(conversation.reasoning_effort)
        return render(conversation)

    monkeypatch.setattr(family, "render", recorded)
    return seen
